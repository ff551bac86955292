"""dense: the reference's module."""

from rosetta.backends.numpy_ref.ops.dense import build, render  # noqa: F401
