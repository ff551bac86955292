"""dropout: the reference's module."""

from rosetta.backends.numpy_ref.ops.dropout import build, render  # noqa: F401
