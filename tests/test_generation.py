"""Greedy generation with a KV cache (issue 45): the reference's cache against its own full
recompute (the trusted answer), planted defects, the requests refused in one line, timing and
memory, a decoder cell's record, and the generated files' ``generate()``. Each generating
backend's own gate against the reference (logits of every step on the reference's tokens,
float64 tokens identical, the cache's two edges) is the conformance suite's
(``tests/conformance/test_generates.py``: the suite's models, a Keras engine's in its own
process).

Tolerances: the logits are the workload's forward outputs, so every step is held to the
decoder's forward bounds for the dtype (``rosetta/models/decoder.yaml``); the recompute check is
float64 summation order only (1e-12 relative to the logits' scale)."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from rosetta import backends
from rosetta.backends import make
from rosetta.backends.numpy_ref.lowering import Ctx
from rosetta.errors import BackendError
from rosetta.runner.generation import gate_generation, greedy, time_generation
from rosetta.spec import get_workload
from rosetta.spec.weights import canonical_weights


@pytest.fixture(scope="module")
def decoder():
    w = get_workload("decoder")
    params = canonical_weights(w, 0)
    ref = make(backends.load("numpy_ref"), w, params, dtype="float64")
    return w, params, ref


def _prompts(n: int, length: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, 8192, size=(n, length)).astype(np.int32)


def _usable(name: str):
    st = backends.status(name)
    if not st.usable:
        pytest.skip(f"{name}: {st.reason}")
    return backends.load(name)


@pytest.mark.parametrize("prompt_len", [1, 7])
def test_the_references_cache_is_its_full_recompute(decoder, prompt_len):
    """Every step's logits with the cache are the full forward's at that position over the
    prompt and the tokens so far, float64 to summation order; a one-token prompt is the first
    position alone."""
    w, _, ref = decoder
    prompts = _prompts(2, prompt_len)
    gen = greedy(ref, prompts, 5)
    seq = np.concatenate([prompts, gen.tokens[:, :-1]], axis=1)  # (N, P + 4)
    full, _ = ref.net(seq.astype(np.int64), Ctx(ref.params, training=False, rng=None))
    for step, logits in enumerate(gen.logits):
        at = full[:, prompt_len - 1 + step]  # the position whose logits chose this token
        scale = np.abs(at).max()
        np.testing.assert_allclose(logits, at, rtol=0, atol=1e-12 * scale, err_msg=f"{step}")
    np.testing.assert_array_equal(gen.tokens, np.stack([g.argmax(-1) for g in gen.logits], 1))


def test_the_gate_sees_positions_that_do_not_advance(decoder, monkeypatch):
    """torch's position embedding planted to read row 0..t-1 while generating (the offset
    ignored): the decode steps' logits fail the float64 bound."""
    from rosetta.backends.torch import lowering

    w, params, ref = decoder
    model = make(_usable("torch"), w, params, dtype="float64")
    monkeypatch.setattr(lowering.PositionEmbedding, "forward",
                        lambda self, x: x + self.table[: x.shape[1]])  # fmt: skip
    g = gate_generation(model, ref, _prompts(2, 8), 4, w.tolerances["float64"].forward)
    assert not g.equivalent and g.logits_violation > 1e3 and g.worst_step >= 1


def test_a_flipped_token_is_reported_with_the_references_margin(decoder):
    """A reference whose third token is its runner-up (planted): the first divergence is
    position 2, and the margin reported is the true reference's top-1 minus top-2 there."""
    w, params, ref = decoder

    class RunnerUp(type(ref)):
        def decode(self, tokens):
            logits, nxt = super().decode(tokens)
            if self._decode.offset == 8 + 2:  # the step choosing new token 2
                nxt = np.argsort(logits, axis=-1)[:, -2]
            return logits, nxt

    flipped = RunnerUp(w, params, ref.runtime)
    prompts = _prompts(2, 8)
    g = gate_generation(flipped, ref, prompts, 5, w.tolerances["float64"].forward)
    assert g.first_divergence == 2 and not g.tokens_equal and not g.equivalent
    top2 = np.sort(greedy(ref, prompts, 5).logits[2], axis=-1)[:, -2:]
    assert g.margin_at_divergence == pytest.approx(float((top2[:, 1] - top2[:, 0]).min()))


@pytest.mark.parametrize(
    ("prompt_len", "new", "words"),
    [(8, 0, "new_tokens: 0"), (100, 29, r"100 \+ 29 > the context 128"), (0, 4, "prompt")],
)
def test_a_request_the_model_cannot_run_is_one_line(decoder, prompt_len, new, words):
    w, _, ref = decoder
    with pytest.raises(BackendError, match=words) as e:
        greedy(ref, np.ones((1, prompt_len), dtype=np.int32), new)
    assert "\n" not in str(e.value)


def test_a_backend_that_does_not_generate_says_so(decoder):
    """The contract's default (a model without ``prefill``/``decode``) refuses in one line, and
    a cell's generation run records why instead of figures."""
    from types import SimpleNamespace

    from rosetta.backends.base import Model
    from rosetta.runner.generation import measure

    w, _, _ = decoder
    plain = SimpleNamespace(backend="chainer", GENERATES=False)
    with pytest.raises(BackendError, match="backend 'chainer' does not generate"):
        Model.prefill(plain, _prompts(1, 4))
    out = measure(plain, w, w.profile("ci").generate, _prompts(4, 32))
    assert out == {"skipped": "backend 'chainer' does not generate yet (no KV-cache decoding: "
                   "prefill/decode)"}  # fmt: skip


def test_time_generation_counts_every_new_token(decoder):
    w, _, ref = decoder
    t = time_generation(ref, _prompts(2, 4), 3)
    assert (t.batch, t.prompt_len, t.new_tokens, len(t.decode_s)) == (2, 4, 3, 2)
    assert t.ttft_s > 0 and t.tokens_per_s == pytest.approx(6 / (t.ttft_s + sum(t.decode_s)))


def test_generation_memory_is_the_windows_own_peak(decoder):
    """The memory of a batch's generations: the process's peak restarted before them (64 MiB
    touched inside the window shows above the resident memory before it), and the KV cache
    the work needs: two (N, positions, width) arrays per causal attention."""
    from types import SimpleNamespace

    from rosetta.runner.generation import _memory

    w, _, _ = decoder
    spec = SimpleNamespace(prompt_len=5, new_tokens=3)

    def touch() -> None:  # 64 MiB of fresh pages from the kernel (whatever the allocator keeps)
        with mmap.mmap(-1, 64 << 20) as m:
            for i in range(0, 64 << 20, mmap.PAGESIZE):
                m[i] = 1

    mem = _memory(w, 2, spec, "float64", touch)
    assert mem["kv_cache_bytes"] == 4 * 2 * 2 * (5 + 3) * 256 * 8  # 4 blocks of width 256
    assert mem["peak_rss_bytes"] - mem["rss_before_bytes"] >= 60 << 20
    assert mem["peak_device_bytes"] is None  # no model, no device


@pytest.mark.parametrize("restarts", [True, False])
def test_a_device_peak_is_recorded_only_when_windowed(decoder, restarts):
    """The device's peak is read after the generations only where the framework restarted its
    counter before them; a peak it cannot restart (JAX's, CuPy's: the training run's) is not
    recorded as the generation's."""
    from types import SimpleNamespace

    from rosetta.runner.generation import _memory

    w, _, _ = decoder
    counter = {"peak": 7 << 30, "resets": 0}  # the training run's peak, before the window

    class Device:
        def reset_peak_device_memory(self) -> bool:
            if restarts:
                counter["resets"] += 1
                counter["peak"] = 0
            return restarts

        def peak_device_memory_bytes(self) -> int:
            return counter["peak"]

    def generate() -> None:
        counter["peak"] = max(counter["peak"], 3 << 20)

    mem = _memory(w, 2, SimpleNamespace(prompt_len=5, new_tokens=3), "float32", generate, Device())
    assert mem["peak_device_bytes"] == (3 << 20 if restarts else None)
    assert counter["resets"] == int(restarts)


@pytest.mark.slow
def test_a_decoder_cell_records_its_training_and_its_generation(tmp_path):
    """``rosetta bench``'s cell on the decoder (``ci``): the training run's token accuracy and
    perplexity, then the profile's generation: gated, and timed at each of its batch sizes."""
    from rosetta import datasets
    from rosetta.runner.cell import run_cell
    from rosetta.runner.config import CellConfig

    _usable("torch")
    data = tmp_path / "data"
    datasets.write_synthetic_imdb(data, n_train=200, n_test=100)
    rec = run_cell(CellConfig("torch", "decoder", "ci", data_dir=str(data)))
    assert rec["status"] == "ok", rec.get("error")
    m = rec["metrics"]
    assert 0 <= m["test_accuracy"] <= 1 and m["test_samples"] == 32
    assert 1 < m["test_perplexity"] < 2 * 8192  # near the vocabulary after 4 steps
    gen = m["generation"]
    spec = get_workload("decoder").profile("ci").generate
    assert gen["gate"]["equivalent"] and gen["gate"]["tokens_equal"]
    assert [b["batch"] for b in gen["batches"]] == list(spec.batches)
    for b in gen["batches"]:
        assert 0 < b["ttft_s"] and 0 < b["decode_p50_s"] <= b["decode_p99_s"]
        assert b["tokens_per_s"] > 0
        mem = b["memory"]  # the cache is 4 blocks' keys and values, (N, 16 + 8, 256) float32
        assert mem["kv_cache_bytes"] == 4 * 2 * b["batch"] * (16 + 8) * 256 * 4
        assert mem["peak_rss_bytes"] >= mem["rss_before_bytes"] > 0
    assert "generation" not in rec.get("flag_codes", [])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["torch", "jax", "numpy_ref", "paddle", "chainer"])
def test_the_generated_file_generates_the_references_tokens(decoder, tmp_path, name):
    """``rosetta code decoder --backend B``: its ``generate`` (torch, Paddle, Chainer: a KV cache
    in a dict, grown by concatenation; JAX: a jitted step over a static cache; NumPy: the
    reference's own layers under ``Ctx.decode``) run
    by the file's own --check in float64 gives the reference's greedy tokens after the batch's
    first 8 ids."""
    from rosetta import codegen
    from rosetta.backends.filetext import CHECK_NEW, CHECK_PROMPT
    from tests.conformance.generated_run import run_files

    _usable(name)
    w, params, ref = decoder
    x = _prompts(2, 128, seed=3)
    y = np.roll(x, -1, axis=1).astype(np.int64)
    out = run_files({"d": (codegen.generate(w, name), w, params, x, y)}, "float64", tmp_path)
    assert not isinstance(out["d"], str), out["d"]
    want = greedy(ref, x[:, :CHECK_PROMPT], CHECK_NEW).tokens
    np.testing.assert_array_equal(out["d"]["generated"], want)
