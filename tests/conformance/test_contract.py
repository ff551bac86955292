"""The rest of the contract, checked the same way for every backend: names, exact weight round
trip, dropout statistics, parameter-free ops, the native loader's order, native train steps,
unsupported ops, devices and the manifest."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from rosetta.backends import make, numpy_ref, runtime_for
from rosetta.backends.base import MANIFEST_KEYS, check_contract, check_layout
from rosetta.datasets import epoch_order, iterate_batches
from rosetta.errors import BackendError
from rosetta.runtime import Runtime
from rosetta.spec import ops
from tests.conformance.conftest import gate_batch, trains, weights


def test_module_has_every_contract_name(backend):
    check_contract(backend)
    assert backend.NAME in backend.__name__
    assert "float32" in backend.DTYPES and set(backend.DTYPES) <= {"float32", "float64"}
    assert "cpu" in backend.DEVICES


def test_check_contract_names_the_missing_name():
    import types

    fake = types.ModuleType("rosetta.backends.fake")
    for name in ("NAME", "DEVICES", "DTYPES", "PRECISIONS", "available", "versions"):
        setattr(fake, name, getattr(numpy_ref, name))
    with pytest.raises(BackendError, match="lacks contract name 'cuda_available'"):
        check_contract(fake)


def test_set_get_params_round_trip_is_exact(backend, workload, dtype, models):
    params = {k: v.astype(dtype) for k, v in weights(workload, seed=1).items()}
    model = models(backend, workload, dtype)  # built from seed 0: loading seed 1 must replace all
    model.set_params(params)
    got = model.get_params()
    assert sorted(got) == sorted(params)
    for name, value in params.items():
        assert got[name].dtype == np.dtype(dtype), name
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    model.set_params(got)  # and back again
    for name, value in model.get_params().items():
        np.testing.assert_array_equal(value, params[name], err_msg=name)


@pytest.mark.parametrize("rate", [0.25, 0.5])
def test_dropout_rate_and_eval_mode(backend, rate):
    n = 200_000
    x = np.ones((8, 25_000), dtype=np.float32)
    if not trains(backend):  # forward-only: dropout is the identity, and training one refused
        ev = backend.run_op(ops.Dropout(rate), x, runtime_for(backend, seed=3), training=False)
        np.testing.assert_array_equal(ev, x)
        with pytest.raises(BackendError, match="forward-only"):
            backend.run_op(ops.Dropout(rate), x, runtime_for(backend, seed=3), training=True)
        return
    y = backend.run_op(ops.Dropout(rate), x, runtime_for(backend, seed=3), training=True)
    dropped = int(np.sum(y == 0))
    # binomial(n, rate): 6 standard deviations is a false alarm once in ~10^9 runs, while a
    # wrong rate (e.g. keep-probability used as drop rate at 0.25) is off by ~400 sigma
    sigma = math.sqrt(n * rate * (1 - rate))
    assert abs(dropped - n * rate) < 6 * sigma, f"dropped {dropped / n:.4f}, spec rate {rate}"
    kept = y[y != 0]
    np.testing.assert_allclose(kept, 1.0 / (1.0 - rate), rtol=1e-6)  # inverted dropout
    ev = backend.run_op(ops.Dropout(rate), x, runtime_for(backend, seed=3), training=False)
    np.testing.assert_array_equal(ev, x)


PARAM_FREE = [
    (ops.ReLU(), (2, 5, 6, 6)),
    (ops.MaxPool2D((2, 2), (2, 2), (0, 0, 0, 0)), (2, 5, 8, 8)),
    (ops.MaxPool2D((3, 3), (2, 2), (1, 1, 1, 1)), (2, 5, 9, 9)),  # ResNet's stem, odd size
    (ops.Flatten("CHW"), (2, 5, 3, 4)),  # channel-major, whatever the backend's layout
    (ops.GlobalAvgPool(), (2, 5, 3, 4)),
]


@pytest.mark.parametrize("op,shape", PARAM_FREE, ids=lambda v: type(v).__name__)
def test_parameter_free_ops_match_reference(backend, op, shape):
    if backend.NAME == "numpy_ref":
        pytest.skip("the reference itself: its ops are checked against finite differences and "
                    "plain loops in tests/test_numpy_ref_ops.py")  # fmt: skip
    # float64, one op: only summation order can differ (the average pool), so 1e-12 relative;
    # a float32-only backend: the same input, rounded to float32 first, and float32's bound
    x = np.random.default_rng(0).normal(size=shape)
    dtype = "float64" if "float64" in backend.DTYPES else "float32"
    if dtype == "float32":
        x = x.astype(np.float32).astype(np.float64)
    want = numpy_ref.run_op(op, x, runtime_for(numpy_ref, dtype="float64"))
    got = backend.run_op(op, x, runtime_for(backend, dtype=dtype))
    rtol, atol = (1e-12, 1e-14) if dtype == "float64" else (1e-6, 1e-7)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rtol, atol=atol)


def test_loader_yields_the_runners_batches_in_order(backend, workload, models):
    n, bs = 22, 4  # 5 complete batches, 2 samples dropped
    rng = np.random.default_rng(5)
    x, _ = gate_batch(workload, n=n, seed=5)
    y = rng.integers(0, 2, size=n)
    model = models(backend, workload)
    order = epoch_order(n, shuffle=True, seed=7, epoch=2)
    got = [model.batch_to_numpy(b) for b in model.loader(x, y, order, bs)]
    want = list(iterate_batches(x, y, bs, shuffle=True, seed=7, epoch=2))
    assert len(got) == len(want) == n // bs
    for (gx, gy), (wx, wy) in zip(got, want, strict=True):
        np.testing.assert_array_equal(gx, wx)
        np.testing.assert_array_equal(gy, wy)
    unlabeled = [model.batch_to_numpy(b) for b in model.loader(x, None, np.arange(n), bs)]
    assert [len(b) for b in unlabeled] == [1] * (n // bs)
    np.testing.assert_array_equal(unlabeled[0][0], x[:bs])


def test_native_steps_and_outputs(backend, workload, models):
    model = models(backend, workload)
    x, y = gate_batch(workload, n=8, seed=2)
    if workload.task == "train" and trains(backend):
        batches = list(model.loader(x, y, np.arange(8), 4))
        before = model.get_params()
        losses = [model.train_step(b) for b in batches]
        model.sync(losses[-1])
        values = [float(model.to_numpy(v)) for v in losses]
        assert all(np.isfinite(values)) and values[0] > 0
        changed = [k for k, v in model.get_params().items() if not np.array_equal(v, before[k])]
        assert changed, "train_step left every parameter unchanged"
    elif workload.task == "train":  # forward-only: a training step is refused in one line
        with pytest.raises(BackendError, match="forward-only"):
            model.train_step(next(iter(model.loader(x, y, np.arange(8), 4))))
    out = model.to_numpy(model.predict(next(iter(model.loader(x, None, np.arange(8), 8)))))
    assert out.shape == (8, *workload.output_shape) and np.all(np.isfinite(out))


@dataclasses.dataclass(frozen=True)
class Unheard:
    """An op no backend knows."""

    def out_shape(self, in_shape):
        return in_shape

    def param_specs(self, in_shape):
        return []

    def flops(self, in_shape):
        return 0


def test_unknown_op_is_a_clear_backend_error(backend, workload):
    w = dataclasses.replace(workload, graph=(Unheard(), *workload.graph))  # refused before a layer
    with pytest.raises(BackendError, match=rf"backend '{backend.NAME}' cannot lower op Unheard"):
        make(backend, w, weights(workload))
    with pytest.raises(BackendError, match="cannot lower op Unheard"):
        backend.run_op(Unheard(), np.ones(3), runtime_for(backend))


def test_manifest_has_required_keys(backend, workload, models):
    man = models(backend, workload).manifest()
    missing = [k for k in MANIFEST_KEYS if k not in man]
    assert not missing, f"{backend.NAME} manifest lacks {missing}"
    assert man["backend"] == backend.NAME and man["dtype"] == "float32"


def test_configure_resolves_the_device_with_its_reason(backend):
    cpu = backend.configure(Runtime.request(backend.NAME, device="cpu"))
    assert (cpu.device, cpu.device_reason) == ("cpu", "asked for cpu")
    auto = backend.configure(Runtime.request(backend.NAME, device="auto"))
    has_cuda = "cuda" in backend.DEVICES and backend.cuda_available()
    assert auto.device == ("cuda" if has_cuda else "cpu")
    assert auto.device_reason.startswith("auto: ")
    if not has_cuda:
        assert "no CUDA GPU" in auto.device_reason or "CPU only" in auto.device_reason
        with pytest.raises(BackendError, match="--device cuda asked for") as err:
            backend.configure(Runtime.request(backend.NAME, device="cuda"))
        assert "\n" not in str(err.value)
        with pytest.raises(BackendError, match="--tf32 applies to CUDA only"):
            backend.configure(Runtime.request(backend.NAME, device="auto", tf32=True))
        assert auto.tf32 is False


def test_backend_folder_has_the_contract_files(backend):
    if not backend.__name__.startswith("rosetta.backends."):
        pytest.skip("out-of-tree backend")
    check_layout(backend.__name__)  # every file of MODULES, each name with its parameters


def test_manifest_values_are_typed(backend, workload):
    man = make(backend, workload, weights(workload), threads=1).manifest()
    assert man["threads"] == 1 and type(man["threads"]) is int
    assert man["tf32"] is False and man["precision"] == "fp32"
