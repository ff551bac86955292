"""Keras on the JAX and PyTorch engines (``keras_jax``, ``keras_torch``), beyond the conformance
suite: the engine is a setting of the process, both training steps (``--keras-step``) compute
the spec's function, float64 means float64, and the op table's two faces.

Keras picks its engine once per process, so each engine's checks run in one fresh interpreter of
their own (``SCRIPT``, shared by the tests of that engine through a module fixture); the MLP of
``tests/workloads/mlp.yaml`` (flatten, dense, dropout, SGD with momentum) keeps them cheap, and
the float64 gate is the strict one (1e-8 on the parameters after 3 steps).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rosetta import backends

ROOT = Path(__file__).resolve().parents[1]
ENGINES = {"keras_jax": "jax", "keras_torch": "torch"}

SCRIPT = r"""
import json, sys
import numpy as np
from rosetta import backends, codegen
from rosetta.errors import BackendError
from rosetta.runner.gate import run_gate
from rosetta.spec import canonical_weights, load_workload

name, mlp = sys.argv[1], sys.argv[2]
out = {}
module = backends.load(name)
lowering = __import__(f"rosetta.backends.{name}.lowering", fromlist=["TABLE"])
table = codegen.op_table(name)
out["faces"] = all(lowering.TABLE.entries[op] is m.build for op, m in table.entries.items())
out["faces"] &= set(lowering.TABLE.entries) == set(codegen.render_table(name).entries)
w = load_workload(mlp)
params = canonical_weights(w, 0)
rng = np.random.default_rng(0)
x = rng.random((4, 3, 32, 32), dtype=np.float32)
y = np.array([0, 3, 5, 9])
for step in ("keras", "custom"):
    model = backends.make(module, w, params, dtype="float64", options={"step": step})
    gate = run_gate(model, w, params, x, y, "float64")
    man = model.manifest()
    out[step] = {"equivalent": gate.equivalent, "divergence": gate.divergence,
                 "checks": sorted(c.what for c in gate.checks),
                 "keras_step": man["keras_step"], "reason": man["keras_step_reason"],
                 "engine": man["engine"], "precision_mode": man["precision_mode"]}
# sync() with no value waits for the last step dispatched (the runner's clock calls it so)
batch = next(iter(model.loader(x, y, np.arange(4), 4)))
loss = model.train_step(batch)
model.sync()
out["ready"] = bool(loss.is_ready()) if hasattr(loss, "is_ready") else None
# bf16 (Keras' mixed_bfloat16 per layer) on the GRU: the bf16 gate, and really bf16
from rosetta.spec import get_workload
from tests.conformance.conftest import gate_batch
gru = get_workload("gru")
gp = canonical_weights(gru, 0)
gx, gy = gate_batch(gru, n=4, seed=1)
def build(wl, p, key):
    if key == "bf16":
        return backends.make(module, wl, p, precision="bf16")
    return backends.make(module, wl, p, dtype=key)
bf16 = backends.make(module, gru, gp, precision="bf16")
gate = run_gate(bf16, gru, gp, gx, gy, "bf16", build=build)
ref = backends.make("numpy_ref", gru, gp, dtype="float64").predict_numpy(gx)
out["bf16"] = {"equivalent": gate.equivalent, "divergence": gate.divergence,
               "fp32_violation": gru.tolerances["float32"].forward.violation(
                   bf16.predict_numpy(gx), ref),
               "mode": bf16.manifest()["precision_mode"]}
# keras_torch's two GRUs (its option gru): PyTorch's fused nn.GRU and Keras' loop, float64
if name == "keras_torch":
    fused = backends.make(module, gru, gp, dtype="float64")
    plain = backends.make(module, gru, gp, dtype="float64", options={"gru": "keras"})
    a, b = fused.predict_numpy(gx), plain.predict_numpy(gx)
    out["gru_forms"] = {
        "fused": fused.manifest()["fused_rnn"], "keras": plain.manifest()["fused_rnn"],
        "layers": [type(m).__name__ for m in fused.net.layers],
        "plain_layers": [type(m).__name__ for m in plain.net.layers],
        "diff": float(np.abs(a - b).max()), "scale": float(np.abs(b).max()),
        "bf16": bf16.manifest()["fused_rnn"],
    }
    # its two attention cores (its option attention), float64, a review of padding only
    tr = get_workload("transformer")
    tp = canonical_weights(tr, 0)
    tx, ty = gate_batch(tr, n=3, seed=1)
    tx[1] = 0
    got = {}
    for form in ("fused", "keras"):
        m = backends.make(module, tr, tp, dtype="float64", options={"attention": form})
        loss, grads = m.loss_and_grads(tx, ty)
        got[form] = (loss, grads, m.manifest()["fused_attention"],
                     sorted({type(l).__name__ for l in m.net.layers}))
    (fl, fg, fm, flayers), (kl, kg, km, klayers) = got["fused"], got["keras"]
    out["attention_forms"] = {
        "fused": fm, "keras": km, "layers": flayers, "plain_layers": klayers,
        "loss": [fl, kl],
        "grad_rel": max(float(np.abs(fg[k] - kg[k]).max() / (np.abs(kg[k]).max() or 1.0))
                        for k in kg),
    }
# planted defect: Keras' own float64 -> float32 narrowing put back fails the float64 gate
from keras.src.backend.common import dtypes
dtypes.BIT64_TO_BIT32_DTYPE["float64"] = "float32"
narrowed = backends.make(module, w, params, dtype="float64")
out["narrowed"] = run_gate(narrowed, w, params, x, y, "float64").equivalent
dtypes.BIT64_TO_BIT32_DTYPE["float64"] = "float64"
# the other Keras engines, asked for in this process: one line each, never a model
for other in ("keras_jax", "keras_torch", "tensorflow"):
    if other == name:
        continue
    try:
        backends.runtime_for(other)
        out[other] = "configured"
    except BackendError as exc:
        out[other] = str(exc)
    out[other + ":available"] = list(backends.load(other).available())
print("RESULT " + json.dumps(out))
"""


#: one worker runs this module (``--dist loadgroup``), so each engine's interpreter starts once
pytestmark = pytest.mark.xdist_group("keras_engines")


# keras_jax is a slow-tier backend (tests/conformance/conftest.py SLOW_BACKENDS: XLA compiles);
# keras_torch's conformance checks are too, and these few engine checks keep it in the quick tier
@pytest.fixture(
    scope="module",
    params=[pytest.param("keras_jax", marks=pytest.mark.slow), "keras_torch"],
)
def engine_run(request):
    """The script's findings for one Keras engine, from a fresh interpreter of its own."""
    return _run_script(request.param, SCRIPT, str(ROOT / "tests" / "workloads" / "mlp.yaml"))


def _run_script(name: str, script: str, arg: str) -> tuple[str, dict]:
    """``script`` run for engine ``name`` in a fresh interpreter: its last ``RESULT`` line."""
    if not backends.status(name).usable:
        pytest.skip(backends.status(name).reason)
    done = subprocess.run(
        [sys.executable, "-c", script, name, arg],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        check=False,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return name, json.loads(lines[-1].removeprefix("RESULT "))


def test_both_keras_steps_pass_the_float64_gate_and_say_which_ran(engine_run):
    name, out = engine_run
    for step in ("keras", "custom"):
        got = out[step]
        assert got["equivalent"], f"{name} --keras-step {step}: {got['divergence']}"
        assert got["checks"] == ["forward", "grads", "loss", "params"]
        assert got["keras_step"].startswith(step) and got["engine"] == ENGINES[name]
    assert out["keras"]["reason"] == "asked for (keras_step keras)"
    assert out["custom"]["reason"] == "asked for (keras_step custom)"
    assert "BIT64_TO_BIT32_DTYPE" in out["custom"]["precision_mode"]


def test_float64_fails_the_gate_when_keras_narrows_it_to_float32(engine_run):
    """Why the backends keep float64: Keras' own promotion (float64 -> float32 on these
    engines) computes a float64 model's matmuls in float32 on PyTorch, which the float64 gate
    catches. (Keras' JAX matmul does not consult that table: the MLP stays float64 there.)"""
    name, out = engine_run
    if name != "keras_torch":
        pytest.skip("Keras' JAX dense layer does not narrow: nothing to plant")
    assert out["narrowed"] is False, name


def test_sync_without_a_value_waits_for_the_last_step(engine_run):
    name, out = engine_run
    assert out["ready"] in ((True,) if name == "keras_jax" else (None, True)), name


def test_bf16_passes_the_bf16_gate_and_really_computes_in_bf16(engine_run):
    name, out = engine_run
    got = out["bf16"]
    assert got["equivalent"], f"{name} bf16: {got['divergence']}"
    assert got["fp32_violation"] > 1.0  # float32's forward bound fails: bf16 really ran
    assert "mixed_bfloat16" in got["mode"]


def test_another_keras_engine_in_the_same_process_is_one_line(engine_run):
    name, out = engine_run
    for other in {"keras_jax", "keras_torch", "tensorflow"} - {name}:
        msg = out[other]
        held = ENGINES[name]
        assert msg != "configured", f"{other} configured in a process holding Keras on {held}"
        assert "\n" not in msg and f"imported Keras on {held}" in msg and other in msg
        ok, why = out[other + ":available"]
        assert ok is False and f"imported Keras on {held}" in why


def test_both_faces_of_the_op_table(engine_run):
    """tests/test_codegen.py checks this in-process, where Keras may run another engine."""
    name, out = engine_run
    assert out["faces"] is True, name


def test_the_default_step_is_the_measured_one_with_its_reason():
    from rosetta.backends.keras_common.engine import step_in_effect

    # measured on the CPU (benchmarks/fastpath_knob): Keras' own step on PyTorch; JAX level
    assert step_in_effect("default", "torch", "cpu")[0] == "keras"
    for engine, device in (("jax", "cpu"), ("jax", "cuda"), ("torch", "cuda")):
        step, why = step_in_effect("default", engine, device)
        assert step == "custom" and why.startswith("default on ")
    assert step_in_effect("keras", "jax") == ("keras", "asked for (keras_step keras)")


def test_keras_torch_runs_pytorch_s_fused_gru_computing_keras_gru_s_function(engine_run):
    """keras_torch's GRU is PyTorch's ``nn.GRU`` in ``TorchModuleWrapper`` by default (a fused
    kernel; Keras' own GRU is a Python loop over the steps on this engine): in float64 the two
    compute the same function, to summation order (1e-10 relative); bf16 keeps Keras' GRU (its
    mixed policy); the manifest says which ran."""
    name, out = engine_run
    if name != "keras_torch":
        pytest.skip("keras_torch's option")
    g = out["gru_forms"]
    assert "TorchModuleWrapper" in g["layers"] and "GRU" not in g["layers"]
    assert "GRU" in g["plain_layers"] and "TorchModuleWrapper" not in g["plain_layers"]
    assert g["fused"].startswith("yes") and g["keras"].startswith("no")
    assert g["bf16"].startswith("no")
    assert g["diff"] <= 1e-10 * g["scale"], g


def test_keras_torch_runs_pytorch_s_attention_kernel_computing_the_composed_function(engine_run):
    """keras_torch's attention core is PyTorch's ``scaled_dot_product_attention`` by default
    (``FusedSelfAttention``), the keras.ops composition every Keras engine shares under
    ``attention=keras``: in float64, with a review of padding only in the batch (the spec's
    all-padding rule), the loss and every gradient agree to summation order, 1e-10 relative
    (measured 5e-15); a key mask dropped or a head misplaced moves them O(1)."""
    name, out = engine_run
    if name != "keras_torch":
        pytest.skip("keras_torch's option")
    a = out["attention_forms"]
    assert "FusedSelfAttention" in a["layers"] and "FusedSelfAttention" not in a["plain_layers"]
    assert "SelfAttention" in a["plain_layers"]
    assert a["fused"].startswith("yes") and a["keras"].startswith("no")
    assert abs(a["loss"][0] - a["loss"][1]) <= 1e-10 * abs(a["loss"][1])
    assert a["grad_rel"] <= 1e-10, a


HANDWRITTEN = r"""
import json, sys
import numpy as np
from rosetta import backends
from rosetta.spec import canonical_weights, get_workload
from tests.conformance.conftest import gate_batch

name, workloads = sys.argv[1], sys.argv[2].split(",")
backends.runtime_for(name)  # Keras' engine, before anything imports keras
import keras
from benchmarks.handwritten import keras_models as hw

out = {}
for wl in workloads:
    w = get_workload(wl)
    w = w.at_image_size(32) if wl == "resnet50" else w
    lowered = backends.make(name, w, canonical_weights(w), dtype="float64")
    x, _ = gate_batch(w, n=2)  # token ids pre-padded with 0, every row ending in a word
    batch = next(iter(lowered.loader(x, None, np.arange(2), 2)))
    with lowered.scope():
        hand = hw.build(wl, dtype="float64", data_format=lowered.fast.data_format, image_size=32)
        hw.copy_weights(lowered.net, hand)
        got = np.asarray(hw.features_step(hand, batch[0]))
    want = lowered.to_numpy(lowered.predict(batch))
    out[wl] = {"dtypes": [str(got.dtype), str(want.dtype)], "shapes": [got.shape, want.shape],
               "diff": float(np.abs(got - want).max()), "scale": float(np.abs(want).max()),
               "padded": bool((x == 0).any()),
               "lowered_layers": sorted({type(l).__name__ for l in lowered.net.layers}),
               "hand_layers": sorted({type(l).__name__ for l in hand.layers})}
    if wl == "transformer":  # AdamW's decay: the same variables, by position, on both sides
        opt, spec = hw.optimizer(wl, w.optimizer), lowered.optimizer
        out["decay"] = {
            "hand": [opt._use_weight_decay(v) for v in hand.trainable_variables],
            "lowered": [spec._var_key(v) in spec._decayed for v in lowered.net.trainable_variables],
        }
small = lambda units: keras.Sequential([keras.Input((4,)), keras.layers.Dense(units)])
try:
    hw.copy_weights(small(3), small(5))
    out["mismatch"] = None
except ValueError as exc:
    out["mismatch"] = str(exc)
print("RESULT " + json.dumps(out))
"""

#: the hand-written models' float64 agreement with the lowered ones (see the test's docstring)
HANDWRITTEN_RTOL = {"keras_jax": {"transformer": 1e-6}}


@pytest.fixture(
    scope="module",
    # both engines in the slow tier (quick-tier budget, stop 58: 8 s for keras_torch's interpreter)
    params=[pytest.param(e, marks=pytest.mark.slow) for e in ("keras_jax", "keras_torch")],
)
def handwritten_run(request):
    """``HANDWRITTEN``'s findings for one Keras engine: the four workloads, in one fresh
    interpreter."""
    return _run_script(request.param, HANDWRITTEN, "cnn,gru,resnet50,transformer")


def test_handwritten_keras_models_compute_what_the_lowered_ones_compute(handwritten_run):
    """The lowering benchmarks (``benchmarks/lowering_keras_{jax,torch}.py``) time the lowered
    model against ``benchmarks/handwritten/keras_models.py``; that only means something if the
    two are the same function. In float64 (resnet50 at 32^2, inference mode, the lowered weights
    loaded by position) they agree to summation order, 1e-10 relative (measured: 0 for the cnn
    and resnet50, whose layers are the same Keras layers; ~5e-16 for the GRU on PyTorch, the
    lowered side's fused nn.GRU against Keras' GRU, and the transformer). One exception, Keras'
    own: on JAX ``keras.ops.dot_product_attention`` (the hand-written attention core, as in
    ``MultiHeadAttention``) computes its softmax in float32 whatever its inputs, so the
    transformer agrees there to float32's rounding only: 1e-6 (measured 1.2e-8), still ~1e5
    below a missing key mask or a misplaced head. Also: the transformer's batch holds padding
    (the mask is exercised), AdamW decays the same variables on both sides, and a shape
    mismatch in ``copy_weights`` is one clear error."""
    name, out = handwritten_run
    for wl in ("cnn", "gru", "resnet50", "transformer"):
        got = out[wl]
        assert got["dtypes"] == ["float64", "float64"] and got["shapes"][0] == got["shapes"][1]
        rtol = HANDWRITTEN_RTOL.get(name, {}).get(wl, 1e-10)
        assert got["diff"] <= rtol * got["scale"], (name, wl, got)
    assert out["transformer"]["padded"]
    if name == "keras_torch":  # the lowered side's fused GRU, Keras' own on the hand-written side
        assert "TorchModuleWrapper" in out["gru"]["lowered_layers"]
    assert "GRU" in out["gru"]["hand_layers"]
    decay = out["decay"]
    assert decay["hand"] == decay["lowered"] and sum(decay["hand"]) == 13  # 12 block kernels + fc
    assert "shape (5,)" in out["mismatch"] or "shape (4, 5)" in out["mismatch"]
