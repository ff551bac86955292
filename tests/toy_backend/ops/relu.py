"""relu: the reference's module."""

from rosetta.backends.numpy_ref.ops.relu import build, render  # noqa: F401
