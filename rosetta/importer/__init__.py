"""Bring your own model: an ONNX file read into the neutral spec (``rosetta import``).

The exporter's inverse: ``rosetta.export`` writes a spec as ONNX nodes; this package reads ONNX
nodes back into spec layers, so a model written in any framework that exports ONNX becomes a
workload every backend runs, gates, times and writes as source.

- ``source.py``: the file, read with every refusal a stranger's file needs (size, truncation,
  external data that leaves its folder, opset, dynamic dimensions, the input's type, the
  initializers' bound), into a :class:`~rosetta.importer.source.Source`;
- ``rules.py``: one small function per ONNX node type (ONNX's reference evaluator's layout), each
  appending spec layers, absorbing a layout-only node, or saying why it cannot;
- ``translate.py``: the walk over the graph's nodes in order, the wiring (ids and inputs where the
  graph branches), the weights by canonical name and the coverage table;
- ``write.py``: the spec text, the weights file beside it (its sha256 in the spec), the
  provenance, and the check of the float64 reference against ONNX Runtime on the original file.

Imports ``onnx`` only inside functions (``rosetta list`` stays light).
"""

from __future__ import annotations

#: the largest file read (protobuf's own limit is 2 GiB; a larger model carries external data)
MAX_FILE_BYTES = 2 * 1024**3
#: the most values one initializer may hold (256 Mi: 1 GiB of float32), and all of them together
MAX_TENSOR_VALUES = 256 * 1024**2
MAX_TOTAL_VALUES = 512 * 1024**2
#: the lowest ai.onnx opset read: Squeeze/Unsqueeze/ReduceSum take their axes as inputs from 13
MIN_OPSET = 13
#: the check of the reference against the source (float64 reference vs ONNX Runtime's float32
#: run of the original file): |ref - ort| <= RTOL * max|ref| + ATOL, elementwise. float32
#: summation-order differences compound with depth: the bound the built-in ResNet-50 gates
#: frameworks at (1e-3 relative to the largest output), which a wrong layout or a dropped term
#: (an O(1) relative error) exceeds by orders of magnitude
CHECK_RTOL = 1e-3
CHECK_ATOL = 1e-5
