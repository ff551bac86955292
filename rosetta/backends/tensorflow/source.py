"""The Rosetta of Keras on TensorFlow, in text: the shared Keras op modules
(``rosetta/backends/keras_common/ops/``: the functional API reads the same on every engine) and
their composition (``keras_common/source.py``) under this backend's name; the one line that reads
differently here, GELU's (Keras' gelu rounds sqrt 2 to float32 on TensorFlow), is chosen by that
name in ``keras_common/ops/gelu.py``. Text only."""

from __future__ import annotations

from rosetta.backends.driver import Entry, discover
from rosetta.backends.keras_common.source import graph, residual, sequence

NAME = "tensorflow"
#: the backend's one op table: keras_common's op modules (each op's build, rendering and weights
#: side by side) and how they compose; ``lowering.TABLE`` and ``RENDER`` are its two faces
OPS = discover(
    NAME,
    "rosetta.backends.keras_common.ops",
    Entry("sequence", sequence),
    Entry("residual", residual),
    graph=Entry("graph", graph),
)
RENDER = OPS.rendering()
