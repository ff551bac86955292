"""The Rosetta of ONNX Runtime, in text: the exporter's op table rendered (spec op -> ONNX nodes,
``rosetta.export.ops``). Text only: imports no onnx."""

from rosetta.export.ops import OPS, RENDER

__all__ = ["OPS", "RENDER"]
