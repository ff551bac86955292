"""The one place Paddle is imported (every other module of this backend takes ``paddle`` from
here), so that it loads safely in a process that already holds TensorFlow.

TensorFlow loads its core with ``RTLD_GLOBAL``, which puts its copy of protobuf's C++ symbols in
the global scope; ``libpaddle.so`` loaded after it binds its own protobuf calls to TensorFlow's
copy (another version) and crashes in its static initialisers (``RepeatedPtrFieldBase::
AddOutOfLineHelper``, while registering its operators): a segmentation fault at ``import paddle``.
Loading Paddle with ``RTLD_DEEPBIND`` makes its libraries prefer their own symbols; it is used
only when TensorFlow is already loaded (a cell runs one framework; the test suite and a user's
notebook may hold several), so a process without TensorFlow loads Paddle exactly as Paddle does.
Paddle's import also warns that ``ccache`` is missing (for C++ extensions): silenced here.
"""

from __future__ import annotations

import os
import sys
import warnings


def load():
    """``paddle``, imported once (with ``RTLD_DEEPBIND`` where TensorFlow is loaded)."""
    if "paddle" in sys.modules:
        return sys.modules["paddle"]
    flags = sys.getdlopenflags()
    deep = "tensorflow" in sys.modules and hasattr(os, "RTLD_DEEPBIND")
    if deep:
        sys.setdlopenflags(flags | os.RTLD_DEEPBIND)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import paddle
    finally:
        sys.setdlopenflags(flags)
    return paddle


paddle = load()
