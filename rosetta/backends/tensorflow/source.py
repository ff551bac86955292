"""The Rosetta of Keras on TensorFlow, in text: the shared Keras table
(``rosetta/backends/keras_common/source.py``: the functional API reads the same on every engine)
under this backend's name. Text only."""

from __future__ import annotations

from rosetta.backends.keras_common.source import op_table

NAME = "tensorflow"
OPS = op_table(NAME)  # build functions: lowering.py; renderings: keras_common/source.py
RENDER = OPS.rendering()
