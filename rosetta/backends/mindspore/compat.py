"""The one place MindSpore is imported (every other module of this backend takes ``ms`` from here).

MindSpore 2.10.0's CPU wheel declares ``numpy>=1.25`` but part of its C++ core was built against
the NumPy 1.x C API: with NumPy 2, the first Python scalar it turns into a tensor prints "A module
that was compiled using NumPy 1.x cannot be run in NumPy 2" and leaves that ImportError *set*
without raising it, so the next MindSpore call from Python fails with ``SystemError: ... returned
a result with an exception set`` (measured: ``nn.GRU(8, 16)`` right after ``ops.gelu``). The
import below takes that first conversion once and clears what it leaves, with its message
silenced (stderr is restored), so that no cell starts with a pending error. NumPy's import
macro reports the failure with ``PyErr_Print``, i.e. through ``sys.excepthook``, which in a
Jupyter kernel is IPython's: it would add an error output to the notebook's cell (and papermill
would call the cell failed, measured), so the hook is Python's own, writing to the silenced
stderr, for that one conversion. MindSpore's own
logging is set to errors only (``GLOG_v=3``) where the user has not chosen a level.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

os.environ.setdefault("GLOG_v", "3")  # MindSpore's C++ log: errors only (its warnings are noise)


def _clear_numpy_abi_error(ms) -> None:
    """Take MindSpore's first scalar conversion and clear the error it leaves pending."""
    hook, sys.excepthook = sys.excepthook, sys.__excepthook__  # not IPython's (docstring)
    try:
        _convert_once(ms)
    finally:
        sys.excepthook = hook


def _convert_once(ms) -> None:
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            ms.Tensor(1.0, ms.float32)
        except Exception:  # noqa: BLE001 - the error is what this clears
            pass
        try:  # the pending error surfaces at the next call from Python, which clears it
            ms.ops.zeros((1,), ms.float32).asnumpy()
        except SystemError:
            pass


def _foreign_onednn() -> str:
    """The path of a oneDNN library another package loaded into this process, or ''."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libdnnl.so" in line}
    except OSError:  # not Linux
        return ""
    return next((p for p in sorted(paths) if "/mindspore/" not in p), "")


def load():
    """``mindspore``, imported once, its pending NumPy-ABI error cleared. MindSpore's CPU kernels
    need its own oneDNN (``libdnnl.so.3``, built with the threadpool runtime); where PaddlePaddle
    loaded its own first, the loader binds MindSpore's kernels to that one and they fail to load
    (``undefined symbol: dnnl_threadpool_interop_stream_create``, measured): one ImportError
    saying so, before MindSpore half-loads. MindSpore first, then Paddle, works (Paddle's dynamic
    graph does not run oneDNN); every Rosetta cell is a process of its own."""
    if "mindspore" in sys.modules:
        return sys.modules["mindspore"]
    other = _foreign_onednn()
    if other:
        raise ImportError(
            f"mindspore cannot load in a process that already loaded another oneDNN ({other}, "
            "PaddlePaddle's): import mindspore first, or run it in a process of its own"
        )
    import mindspore as ms

    _clear_numpy_abi_error(ms)
    return ms


ms = load()
