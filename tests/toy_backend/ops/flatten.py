"""flatten: the reference's module."""

from rosetta.backends.numpy_ref.ops.flatten import build, render  # noqa: F401
