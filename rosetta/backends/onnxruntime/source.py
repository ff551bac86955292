"""The Rosetta of ONNX Runtime, in text: the exporter's op table rendered (spec op -> ONNX nodes,
``rosetta.export.table``: every op of the spec format, the Transformer's composed from opset-17
nodes). Text only: imports no onnx."""

from rosetta.export.table import OPS, RENDER

__all__ = ["OPS", "RENDER"]
