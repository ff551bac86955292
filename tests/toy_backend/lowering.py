"""The toy's native face: the reference's layers through the toy's own table."""

from rosetta.backends.numpy_ref.lowering import apply_op, residual, sequence  # noqa: F401

from .source import OPS

TABLE = OPS.lowering(globals())
