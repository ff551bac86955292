"""Fixtures shared by every test: process settings restored, the machine-peak probes stubbed,
small synthetic data, XLA's quick compiles, and the grouping that keeps a backend's conformance
checks on one worker."""

from __future__ import annotations

import os
import sys

import pytest


def _own_cores() -> None:
    """Under ``pytest -n N`` each worker takes its own share of the cores (affinity, inherited by
    every cell it starts): the frameworks size their pools to the usable cores, so two workers
    each running a 2-thread cell on 2 cores would spin against each other (torch and Chainer
    slow up to 10x under such contention). A test that needs more threads than its share asks
    for ``--oversubscribe``, as a user would."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count < 2 or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= count:
        os.sched_setaffinity(0, cores[int(worker[2:]) % count :: count])


_own_cores()


def _mindspore_first() -> None:
    """MindSpore cannot load after PaddlePaddle in one process (both ship ``libdnnl.so.3``;
    ``rosetta/backends/mindspore/compat.py``), and a test process runs both: where it is
    installed, it is imported first."""
    import importlib.util

    if importlib.util.find_spec("mindspore") is not None:
        try:
            import rosetta.backends.mindspore.compat  # noqa: F401
        except ImportError:
            pass  # its checks say why


_mindspore_first()


#: XLA's LLVM optimisation level in the suite: the same XLA programs (HLO and its passes as ever)
#: with LLVM's code generation at -O0, which keeps IEEE semantics (no fast-math either way), so
#: the values checked are the programs' own to the last place the tolerances see. Measured on a
#: 2-core Zen 1: a JAX generated file's check and a float64 edge-case gate took 25-37% less time
#: (XLA's compiles, every build of the suite pays; JAX, Keras on JAX and TensorFlow's XLA steps).
#: As torch's eager default here (``eager_torch``), a test setting of the suite only: ``rosetta
#: bench`` compiles at XLA's default, and a record names any XLA_FLAGS a run had.
XLA_TEST_OPT = "--xla_backend_optimization_level=0"


def _xla_fast_compiles() -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {XLA_TEST_OPT}".strip()


_xla_fast_compiles()
_CORES = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
_XLA_FLAGS = os.environ.get("XLA_FLAGS")


@pytest.fixture(autouse=True)
def eager_torch(monkeypatch):
    """torch compiles forward-only workloads by default (inductor with freezing: 10-30 s per
    batch shape of ResNet-50); the suite builds such models dozens of times, so a runtime that
    names no compile setting runs eager here (the torch backend's option ``compile`` defaults
    to ``off`` in this process), unless a test asks for ``options={"compile": "default"}`` or
    ``"on"``, or sets the runner's default back (tests/test_torch_compiled_features.py)."""
    torch_compile_default(monkeypatch, "off")


def torch_compile_default(monkeypatch, value: str) -> None:
    """Make ``value`` the default of the torch backend's option ``compile`` in this process."""
    from dataclasses import replace

    import rosetta.backends.torch as package

    declared = tuple(
        replace(o, default=value) if o.name == "compile" else o for o in package.OPTIONS
    )
    monkeypatch.setattr(package, "OPTIONS", declared)


@pytest.fixture(autouse=True)
def _process_settings_restored():
    """A test that configures ``threads=1`` in this process (the JAX backend pins every thread's
    CPU affinity and may set ``XLA_FLAGS``) must not leave later tests, or the cells they start
    (children inherit the affinity), on one core."""
    yield
    if _CORES is not None and os.sched_getaffinity(0) != _CORES:
        jax_runtime = sys.modules.get("rosetta.backends.jax.runtime")
        if jax_runtime is not None:
            jax_runtime.set_threads(len(_CORES))  # widens every thread back
        os.sched_setaffinity(0, _CORES)
    if os.environ.get("XLA_FLAGS") != _XLA_FLAGS:
        if _XLA_FLAGS is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = _XLA_FLAGS


@pytest.fixture(scope="session")
def small_data(tmp_path_factory):
    """Synthetic IMDB and CIFAR-10 big enough for the ci profiles (256 train / 128 test)."""
    from rosetta import datasets

    d = tmp_path_factory.mktemp("data")
    datasets.write_synthetic_imdb(d, n_train=600, n_test=300)
    datasets.write_synthetic_cifar10(d, n_train=600, n_test=300)
    return d


#: what ``rosetta bench`` records as the machine's peaks in tests that are not about them
STUB_PEAKS = {"stub": "tests: the probes are tested in tests/test_peak.py", "gemm": {}}


@pytest.fixture(autouse=True)
def _machine_peaks_stubbed(request, monkeypatch):
    """``rosetta bench`` probes the machine before its first cell (a 2048-square GEMM five times,
    then a NumPy, a torch and a conv subprocess, then the compiled ceiling kernels and the triad:
    seconds per run); ``tests/test_peak.py`` and ``tests/test_ceiling.py`` test the probes, and
    every other test that starts a run in this process gets fixed figures (no ceiling: the
    report falls back to the matmul probe's 100 GFLOP/s, stated as such) and a load reading
    without the 0.5 s sample of each process's CPU. A test marked
    ``real_peaks`` gets the real probes."""
    if request.node.get_closest_marker("real_peaks") or request.module.__name__.endswith(
        ("test_peak", "test_ceiling")
    ):
        yield
        return
    from rosetta.runner import ceiling, peak, probe, quiet

    # the quiet check before a run's first cell reads the load at once instead of sampling each
    # process's CPU for 0.5 s (tests/test_axes.py tests the sampling's verdicts)
    read = quiet.read_load
    monkeypatch.setattr(quiet, "read_load", lambda sample_s=0.0: read(sample_s))
    monkeypatch.setattr(probe, "gemm_peak_gflops", lambda *a, **k: 100.0)
    monkeypatch.setattr(peak, "machine_peaks", lambda *a, **k: dict(STUB_PEAKS))

    def _no_ceiling(*a, **k):
        raise AssertionError("the ceiling probe ran in a test not about it (mark it real_peaks)")

    monkeypatch.setattr(ceiling, "measure", _no_ceiling)
    yield


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by the markers added here
def pytest_collection_modifyitems(config, items):
    """A conformance check with a slow tier's parameter or backend is marked slow
    (``tests/conformance/conftest.py`` ``SLOW_PARAMS``, ``SLOW_BACKENDS``); one a Keras engine
    leaves to tensorflow (``ENGINE_CHECKS_ON_TENSORFLOW``) is not collected. (Its worker group is
    a mark of the ``backend`` fixture's parameter: xdist renames an item by its group in its own
    ``pytest_collection_modifyitems``, which ran before this one and so missed a group added
    here: every backend's checks were spread over both workers, and a Keras engine's child
    process ran once per worker.)"""
    from tests.conformance.conftest import left_to_tensorflow, slow_tier

    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "conformance" not in item.nodeid.split("::")[0]:
            kept.append(item)
            continue
        if left_to_tensorflow(item.originalname, params):
            dropped.append(item)
            continue
        kept.append(item)
        if slow_tier(params):
            item.add_marker(pytest.mark.slow)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
