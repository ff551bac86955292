"""The reference's model (the toy's own table decides what it lowers; see source.py)."""

from rosetta.backends.numpy_ref.model import build  # noqa: F401
