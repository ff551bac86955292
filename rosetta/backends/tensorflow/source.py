"""The Rosetta of Keras on TensorFlow, in text: the shared Keras table
(``rosetta/backends/keras_common/source.py``: the functional API reads the same on every engine)
under this backend's name. Text only."""

from __future__ import annotations

from rosetta.backends.keras_common.source import op_table

NAME = "tensorflow"
#: the backend's one op table: each op's build function (named: lowering.py) and its source
#: rendering (keras_common/source.py); ``lowering.TABLE`` and ``RENDER`` are its two faces
OPS = op_table(NAME)
RENDER = OPS.rendering()
