"""Weights at the boundary: the exporter's initializer conversions (``rosetta.export.weights``:
canonical names and layouts kept, the GRU's ``W``/``R`` transposed to ``(1, 3H, in)`` and its two
biases joined as ``B``), the one home shared with ``rosetta.backends.onnxruntime``."""

from rosetta.export.weights import to_canonical, to_initializers

__all__ = ["to_canonical", "to_initializers"]
