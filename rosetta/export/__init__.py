"""The spec as an interchange file: a workload lowered to an ONNX graph with its weights.

``rosetta export WORKLOAD --onnx FILE`` writes the workload's forward (evaluation) graph, with
the canonical weights as initializers, built node by node with the ``onnx`` package's own
builders (``onnx.helper``, ``onnx.numpy_helper``; no framework exporter is involved, so the graph
is the spec's and nothing else's), checked by ``onnx.checker`` and ONNX shape inference. The
training workloads are exported in their dropout-free evaluation form (dropout is the identity
at evaluation). The serving engines (``rosetta.backends.onnxruntime``, ``.openvino``) run that
same graph.

- ``ops/``: one module per spec op, framework-free (the ONNX nodes it becomes, emitted and
  rendered as text); ``table.py`` the table they make (the engines' ``source.py``);
- ``graph.py``: the table's native face, the graph builder (imports ``onnx``);
- ``weights.py``: canonical weights <-> ONNX initializers (the GRU's transposes), nothing else;
- ``serving.py``: the forward-only :class:`~rosetta.backends.base.Model` both engines share.

Nothing here imports ``onnx`` at package import: ``rosetta list`` and the CLI stay light.
"""

from __future__ import annotations

#: the opset the exporter writes by default (ai.onnx): the first with LayerNormalization (the
#: Transformer's); every other op it emits exists unchanged from opset 13 (Squeeze's and
#: ReduceSum's axes as an input, Gather, Gemm, GRU, BatchNormalization in inference form, Erf,
#: Softmax over one axis)
OPSET = 17
#: the lowest opset the exporter can express the spec's ops in (Squeeze's axes input: opset 13);
#: an op that needs more (LayerNorm: 17) says so (``ops.MIN_OPSET_OF``)
MIN_OPSET = 13
