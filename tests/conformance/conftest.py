"""Fixtures of the conformance suite: every registered backend x every workload, written once.

A backend that cannot run here (framework not installed, lowering not written) is skipped with
its reason, never failed. Run one backend's suite with ``pytest tests/conformance -k torch``.

**One model per (backend, workload, dtype).** Building a model (ResNet-50 above all) costs more
than most checks that read it, so the checks share one build through :func:`models`, a
session-wide cache: a check that needs the canonical weights loads them with ``set_params``
first (which, by the contract, also resets the optimiser state), so the order the checks run in
does not matter. A check that needs another runtime (one thread, another precision) or a model
that must fail to build still calls ``make`` itself. Under ``pytest -n`` every backend's checks
go to one worker (``tests/conftest.py`` groups them), so a model is built once per run.

**A backend whose engine is a setting of the process** (Keras on JAX or PyTorch: its package
names a ``KERAS_ENGINE``) runs its checks in one child pytest of its own, started by the first
of them (``engine_process.py``): Keras picks its engine once per process, and this process may
hold Keras on TensorFlow already. Each check here reports the child's outcome for it.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from rosetta import backends
from rosetta.backends import make
from rosetta.backends.base import dtype_unsupported, training_unsupported
from rosetta.spec import canonical_weights, get_workload
from tests.conformance import engine_process

WORKLOADS = ("cnn", "gru", "resnet50", "transformer", "decoder")
DTYPES = ("float32", "float64")

#: The tiers. The quick tier (``bash scripts/test.sh``, what a contributor runs between edits)
#: checks every backend (but ``SLOW_BACKENDS``) x workload at float32, the precision its timed
#: program runs, and each edge-case set as one batch; the checks at float64 (the strict
#: comparison of conventions) and each set's hardest sample alone run in the slow tier, which CI
#: runs right after the quick one (``.ci/run``), so none is dead. A check parametrised by one of
#: these values, or of a backend in ``SLOW_BACKENDS``, is marked slow;
#: ``pytest tests/conformance -m "" -k NAME`` runs one backend's whole suite.
SLOW_PARAMS = {"dtype": ("float64",), "batch": ("one",)}
#: Backends whose every conformance check is the slow tier's, with why: a first build that
#: compiles for minutes on a fresh machine, or a child process per backend (20-50 s of the quick
#: tier's 6 minutes) for checks the quick tier already makes of the same lowering or engine.
SLOW_BACKENDS = {
    "pytensor": "compiles each op's C code with g++ on first use: minutes per workload on a cold "
    "compile cache, as on a fresh CI machine",
    "keras_jax": "compiles each program with XLA in a child process of its own (Keras picks its "
    "engine once per process): its engine, jax, is checked in the quick tier",
    "keras_torch": "runs its checks in a child process of its own (Keras picks its engine once "
    "per process); the Keras lowering is checked in the quick tier on tensorflow, its engine "
    "as torch, and the engine itself by tests/test_backend_keras.py",
}
#: Checks a Keras engine (``keras_jax``, ``keras_torch``) leaves to ``tensorflow``, which makes
#: them on the same Keras code (``rosetta/backends/keras_common``: one lowering, one generated
#: file's text but for its engine lines), by the dtype they are left at (``None``: every dtype):
#: its generated file's, edge cases' and generation's float64 runs, and the imported models
#: (``test_imported.py``: the corpus lowered by the same Keras ops). The engines' own paths
#: (keras_torch's fused attention core) run at float32, where their every other check runs; at
#: float64 each engine still passes its whole-model gate on every workload
#: (``test_matches_reference``), every op probe (``test_ops.py``, float64: the imported corpus's
#: ops among them) and the exact parameter round trip, the checks that see an engine's own
#: convention or a narrowed dtype. (Measured: these were half of keras_jax's 23 minutes in the
#: slow tier.)
ENGINE_CHECKS_ON_TENSORFLOW = {
    "test_generated_file_matches_reference": "float64",
    "test_edge_cases_match_reference": "float64",
    "test_transformer_large_logits_match_reference": "float64",
    "test_every_backend_runs_the_imported_model": None,
    "test_the_generated_source_of_an_imported_model_matches_the_reference": None,
    "test_generates_as_the_reference": "float64",
}
RESNET_SIZE = 64  # quick suite: ResNet-50 on 64x64 inputs (same parameters; 224 is marked slow)


def slow_tier(params: dict) -> bool:
    """Whether a conformance check with these parameters belongs to the slow tier."""
    if params.get("backend") in SLOW_BACKENDS:
        return True
    return any(params.get(name) in values for name, values in SLOW_PARAMS.items())


def left_to_tensorflow(name: str, params: dict) -> bool:
    """Whether the conformance check ``name`` with these parameters is one a Keras engine leaves
    to ``tensorflow`` (``ENGINE_CHECKS_ON_TENSORFLOW``): not collected."""
    backend = params.get("backend")
    if name not in ENGINE_CHECKS_ON_TENSORFLOW or not isinstance(backend, str):
        return False
    dtype = ENGINE_CHECKS_ON_TENSORFLOW[name]
    if dtype is not None and params.get("dtype") != dtype:
        return False
    return engine_process.keras_engine(backend) is not None


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """A check of a backend whose engine is a setting of the process reports what its own
    process found (see the module docstring); every other check runs here."""
    backend = engine_process.delegated(pyfuncitem)
    if backend is None:
        return None
    got = engine_process.outcome(pyfuncitem, backend)
    if got["outcome"] == "skipped":
        pytest.skip(got["text"])
    if got["outcome"] == "failed":
        pytest.fail(f"in {backend}'s own process: {got['text']}", pytrace=False)
    return True


def backend_params(names) -> list:
    """The ``backend`` fixture's parameters: one worker runs every check of a backend (``--dist
    loadgroup``), so its models are built once and its engine's child process
    (``engine_process``) starts once. The group is a mark of the parameter itself: xdist reads
    it at collection, before any other hook. Every fixture named ``backend`` takes these."""
    return [
        pytest.param(name, marks=pytest.mark.xdist_group(f"conformance-{name}"), id=name)
        for name in names
    ]


#: set by CI (``.ci/run``), where every framework is installed: a backend that cannot run there
#: fails its checks instead of skipping them, so a broken install is never a green run of skips
REQUIRE_ENV = "ROSETTA_REQUIRE_BACKENDS"


def usable_backend(name: str):
    """Backend ``name``'s module; where it cannot run here, a skip with the reason, or a failure
    under ``$ROSETTA_REQUIRE_BACKENDS=all`` (CI)."""
    st = backends.status(name)
    if not st.usable:
        if os.environ.get(REQUIRE_ENV) == "all":
            pytest.fail(f"{name}: {st.reason} (${REQUIRE_ENV}=all: CI runs every backend)")
        pytest.skip(f"{name}: {st.reason}")
    return backends.load(name)


@pytest.fixture(params=backend_params(backends.names()))
def backend(request):
    """The backend module, or a skip with the reason it cannot run here."""
    return usable_backend(request.param)


def conformance_workload(name: str):
    """A workload as the suite runs it: ResNet-50 at the quick suite's input size."""
    w = get_workload(name)
    return w.at_image_size(RESNET_SIZE) if w.name == "resnet50" else w


@pytest.fixture(params=WORKLOADS)
def workload(request):
    """A workload, ResNet-50 at the quick suite's input size."""
    return conformance_workload(request.param)


@pytest.fixture(params=DTYPES)
def dtype(request):
    return request.param


def _process_state() -> tuple:
    """What a model built in this process depends on beyond its own objects: TensorFlow's eager
    context, which a build with another thread count replaces (``tensorflow/runtime.py``
    ``set_threads``: its pools are fixed once started), leaving every earlier TensorFlow model
    computing with dead handles. A cached model built under another state is built again."""
    import sys

    context = sys.modules.get("tensorflow.python.eager.context")
    return (id(context.context()) if context is not None else None,)


def require_lowering(backend, workload) -> None:
    """Skip (with the ops) where ``backend``'s op table has no entry for an op of ``workload``:
    a backend that has not lowered a newer workload yet (the transformer on the backends added
    beside it). Decided from the table alone (``rosetta.backends.missing_ops``, what
    ``rosetta bench`` skips such a cell with), so a backend whose table holds every op and still
    fails to build fails."""
    why = backends.lowering_unsupported(backend.NAME, workload)
    if why:
        pytest.skip(why)


@pytest.fixture(autouse=True)
def _lowered(request):
    """Every check of a (backend, workload) pair skips where the backend lacks one of the
    workload's ops (:func:`require_lowering`), whatever its parameters are called."""
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    name = params.get("workload") or params.get("name") or params.get("workload_name")
    if isinstance(params.get("backend"), str) and name in WORKLOADS:
        why = backends.lowering_unsupported(params["backend"], get_workload(name))
        if why:
            pytest.skip(why)


class ModelCache:
    """Models built once per (backend, workload, input size, dtype) and handed out holding the
    canonical weights of seed 0 (``set_params`` on every hand-out)."""

    def __init__(self) -> None:
        self._built: dict[tuple, tuple[tuple, object]] = {}
        self.builds = 0

    def __call__(self, backend, workload, dtype: str = "float32"):
        require_dtype(backend, dtype)
        require_lowering(backend, workload)
        key = (backend.NAME, workload.name, workload.input.shape, dtype)
        params = weights(workload)
        state, model = self._built.get(key, (None, None))
        if model is None or state != _process_state():
            model = make(backend, workload, params, dtype=dtype)
            self._built[key] = (_process_state(), model)
            self.builds += 1
        else:
            model.set_params(params)
        return model


@pytest.fixture(scope="session")
def models() -> ModelCache:
    """The suite's one model per (backend, workload, dtype); see the module docstring."""
    return ModelCache()


def require_dtype(backend, dtype: str) -> None:
    """Skip, with the reason, a check in a dtype the backend does not run (its ``DTYPES``: the
    serving engines run float32 only)."""
    why = dtype_unsupported(backend, backend.NAME, dtype)
    if why:
        pytest.skip(why)


def trains(backend) -> bool:
    """Whether the backend runs training steps: not a forward-only one (``FORWARD_ONLY``, the
    contract's capability, ``rosetta.backends.base.training_unsupported``)."""
    return not training_unsupported(backend, backend.NAME)


def require_training(backend) -> None:
    """Skip, with the backend's own reason, a check that needs a training step."""
    why = training_unsupported(backend, backend.NAME)
    if why:
        pytest.skip(why)


def gate_labels(backend, y):
    """The gate's labels for ``backend``: ``None`` (a forward-only gate) where it cannot train."""
    return y if trains(backend) else None


def gate_batch(workload, n: int = 4, seed: int = 0):
    """A small fixed batch in canonical layout: images in [0, 1), or pre-padded token ids."""
    rng = np.random.default_rng(seed)
    windows = workload.dataset.get("windows")
    if windows:  # a language model: windows of running text (no padding), the next id labels
        vocab = int(workload.dataset.get("num_words"))
        w = rng.integers(1, vocab, size=(n, windows + 1))
        return w[:, :-1].astype(np.int32), w[:, 1:].astype(np.int64)
    if workload.input.dtype == "int32":
        (t,) = workload.input.shape
        x = np.zeros((n, t), dtype=np.int32)
        for i in range(n):
            length = int(rng.integers(t // 4, t + 1))
            x[i, t - length :] = rng.integers(1, 30000, size=length)
        x[:, t - 1] = rng.integers(3, 30000, size=n)  # every review ends in a word
    else:
        x = rng.random((n, *workload.input.shape), dtype=np.float32)
    y = None
    if workload.task == "train":
        y = rng.integers(0, workload.output_shape[0], size=n).astype(np.int64)
    return x, y


_WEIGHTS: dict[tuple, dict] = {}


def weights(workload, seed: int = 0):
    """The canonical weights every backend starts from (float32, as the runner uses them): made
    once per (workload, input size, seed), handed out as a fresh copy (a check may change them)."""
    key = (workload.name, workload.input.shape, seed)
    if key not in _WEIGHTS:
        _WEIGHTS[key] = canonical_weights(workload, seed)
    return {k: v.copy() for k, v in _WEIGHTS[key].items()}
