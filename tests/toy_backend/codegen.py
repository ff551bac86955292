"""The toy's file: the reference's template."""

from rosetta.backends.numpy_ref.codegen import FRAMEWORK, MODULES, NEEDS, source  # noqa: F401
