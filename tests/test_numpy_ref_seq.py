"""Tests of the reference's sequence ops (the Transformer's): gradients against finite
differences, forward values against plain loops, float32 kept, and the edges the reference
defines (a row of padding only, the mean over zero tokens, large logits, exact GELU).

Same method as ``tests/test_numpy_ref_ops.py`` (whose ``Case`` and finite differences it uses).
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from rosetta.backends.numpy_ref import nn, seq
from tests.test_numpy_ref_ops import GRAD_ATOL, GRAD_RTOL, Case, numeric_grad

ROLES = ("wq", "bq", "wk", "wv", "bv", "wo", "bo")


def _valid(n: int, t: int) -> np.ndarray:
    """Pre-padded rows: row 0 full, row 1 two real tokens, row 2 none (padding only)."""
    valid = np.ones((n, t), dtype=bool)
    if n > 1:
        valid[1, : t - 2] = False
    if n > 2:
        valid[2] = False
    return valid


def layer_norm_case(rng, dtype) -> Case:
    inputs = {
        "x": rng.standard_normal((2, 3, 5)).astype(dtype),
        "gamma": rng.standard_normal(5).astype(dtype),
        "beta": rng.standard_normal(5).astype(dtype),
    }

    def forward(x, gamma, beta):
        return seq.layer_norm_forward(x, gamma, beta, 1e-5)

    def backward(dy, cache):
        dx, dg, db = seq.layer_norm_backward(dy, cache)
        return {"x": dx, "gamma": dg, "beta": db}

    return Case(forward, backward, inputs, ("x", "gamma", "beta"))


def gelu_case(rng, dtype) -> Case:
    inputs = {"x": (3 * rng.standard_normal((2, 3, 4))).astype(dtype)}
    return Case(seq.gelu_forward, lambda dy, c: {"x": seq.gelu_backward(dy, c)}, inputs, ("x",))


def position_case(rng, dtype) -> Case:
    inputs = {
        "x": rng.standard_normal((2, 3, 4)).astype(dtype),
        "table": rng.standard_normal((5, 4)).astype(dtype),  # longer than the sequence
    }

    def backward(dy, cache):
        return {"x": dy, "table": seq.position_backward(dy, cache)}

    return Case(seq.position_forward, backward, inputs, ("x", "table"))


def attention_inputs(rng, dtype, n=3, t=4, e=6) -> dict:
    inputs = {"x": rng.standard_normal((n, t, e)).astype(dtype), "valid": _valid(n, t)}
    for role in ROLES:
        shape = (e, e) if role.startswith("w") else (e,)
        inputs[role] = (0.5 * rng.standard_normal(shape)).astype(dtype)
    return inputs


def attention_case(rng, dtype) -> Case:
    def forward(x, valid, **weights):
        return seq.attention_forward(x, valid, tuple(weights[r] for r in ROLES), heads=2)

    def backward(dy, cache):
        dx, grads = seq.attention_backward(dy, cache)
        return {"x": dx, **dict(zip(ROLES, grads, strict=True))}

    return Case(forward, backward, attention_inputs(rng, dtype), ("x", *ROLES))


def causal_attention_case(rng, dtype) -> Case:
    inputs = attention_inputs(rng, dtype, n=2, t=5)
    inputs["valid"] = seq.causal_mask(5)

    def forward(x, valid, **weights):
        return seq.attention_forward(x, valid, tuple(weights[r] for r in ROLES), heads=2)

    def backward(dy, cache):
        dx, grads = seq.attention_backward(dy, cache)
        return {"x": dx, **dict(zip(ROLES, grads, strict=True))}

    return Case(forward, backward, inputs, ("x", *ROLES))


def sequence_cross_entropy_case(rng, dtype) -> Case:
    """A language model's loss: a label per position, the mean over samples and positions."""
    inputs = {"logits": (2 * rng.standard_normal((2, 3, 5))).astype(dtype),
              "labels": rng.integers(0, 5, size=(2, 3))}  # fmt: skip

    def backward(dy, cache):  # dy: the 0-d loss's cotangent
        return {"logits": nn.softmax_cross_entropy_backward(cache, float(dy))}

    return Case(nn.softmax_cross_entropy_forward, backward, inputs, ("logits",))


def masked_mean_case(rng, dtype) -> Case:
    inputs = {"x": rng.standard_normal((3, 4, 5)).astype(dtype), "valid": _valid(3, 4)}

    def backward(dy, cache):
        return {"x": seq.masked_mean_backward(dy, cache)}

    return Case(seq.masked_mean_forward, backward, inputs, ("x",))


def dense_sequence_case(rng, dtype) -> Case:
    inputs = {
        "x": rng.standard_normal((2, 3, 4)).astype(dtype),
        "w": rng.standard_normal((4, 5)).astype(dtype),
        "b": rng.standard_normal(5).astype(dtype),
    }

    def backward(dy, cache):
        dx, dw, db = nn.dense_backward(dy, cache)
        return {"x": dx, "w": dw, "b": db}

    return Case(nn.dense_forward, backward, inputs, ("x", "w", "b"))


CASES = {
    "layer_norm": layer_norm_case,
    "gelu": gelu_case,
    "position": position_case,
    "attention": attention_case,
    "causal_attention": causal_attention_case,
    "sequence_cross_entropy": sequence_cross_entropy_case,
    "masked_mean": masked_mean_case,
    "dense_sequence": dense_sequence_case,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients(name: str) -> None:
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    case = CASES[name](rng, np.float64)
    y, cache = case.forward(**case.inputs)
    r = rng.standard_normal(np.shape(y))  # random projection: L = sum(r * y)
    analytic = case.backward(r, cache)
    for w in case.wrt:
        numeric = numeric_grad(case, w, r)
        assert np.isfinite(analytic[w]).all(), f"{name}: d/d{w} is not finite"
        np.testing.assert_allclose(
            analytic[w], numeric, rtol=GRAD_RTOL, atol=GRAD_ATOL, err_msg=f"{name}: d/d{w}"
        )


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_stays_float32(name: str) -> None:
    case = CASES[name](np.random.default_rng(0), np.float32)
    y, cache = case.forward(**case.inputs)
    assert y.dtype == np.float32
    grads = case.backward(np.ones_like(y), cache)
    for w in case.wrt:
        assert grads[w].dtype == np.float32, f"{name}: d/d{w} is {grads[w].dtype}"


# --------------------------------------------------------------------------- plain loops


def loop_attention(x, valid, weights, heads):
    """Per sample, head and query: scores over the valid keys, softmax, weighted values."""
    wq, bq, wk, wv, bv, wo, bo = weights
    n, t, e = x.shape
    d = e // heads
    out = np.zeros((n, t, e))
    for i in range(n):
        q, k, v = x[i] @ wq + bq, x[i] @ wk, x[i] @ wv + bv
        heads_out = np.zeros((t, e))
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            for a in range(t):
                keys = [b for b in range(t) if valid[i, b]]
                if not keys:
                    continue  # nothing to attend to: the head's output stays 0
                s = [sum(q[a, cols] * k[b, cols]) / math.sqrt(d) for b in keys]
                top = max(s)
                w = [math.exp(si - top) for si in s]
                for b, wb in zip(keys, w, strict=True):
                    heads_out[a, cols] += wb / sum(w) * v[b, cols]
        out[i] = heads_out @ wo + bo
    return out


def test_attention_matches_loop() -> None:
    inputs = attention_inputs(np.random.default_rng(3), np.float64, n=3, t=5, e=8)
    weights = tuple(inputs[r] for r in ROLES)
    for heads in (1, 2, 4):
        y, _ = seq.attention_forward(inputs["x"], inputs["valid"], weights, heads)
        np.testing.assert_allclose(
            y, loop_attention(inputs["x"], inputs["valid"], weights, heads), rtol=1e-12, atol=1e-12
        )


def test_causal_attention_matches_loop_and_never_reads_a_later_position() -> None:
    """Query ``a`` over keys ``b <= a`` (the loop, row by row as a growing prefix); a change of
    the tokens after position ``a`` leaves the outputs up to ``a`` bit for bit."""
    inputs = attention_inputs(np.random.default_rng(6), np.float64, n=2, t=5, e=8)
    weights = tuple(inputs[r] for r in ROLES)
    x = inputs["x"]
    y, _ = seq.attention_forward(x, seq.causal_mask(5), weights, 2)
    for a in range(5):  # the prefix x[:, :a+1] alone gives the same row a
        prefix = loop_attention(x[:, : a + 1], np.ones((2, a + 1), dtype=bool), weights, 2)
        np.testing.assert_allclose(y[:, a], prefix[:, a], rtol=1e-12, atol=1e-12)
    later = x.copy()
    later[:, 3:] += 1.0
    y2, _ = seq.attention_forward(later, seq.causal_mask(5), weights, 2)
    np.testing.assert_array_equal(y2[:, :3], y[:, :3])
    assert np.abs(y2[:, 3:] - y[:, 3:]).max() > 1e-3


def test_tied_dense_gradient_is_the_sum_of_both_uses_of_the_table() -> None:
    """``embedding`` then ``tied_dense`` over one table: the table's gradient (the two layers'
    contributions added by ``ctx.acc``) against central differences of ``sum(r * logits)``."""
    from rosetta.backends.numpy_ref import layers

    rng = np.random.default_rng(7)
    ids = rng.integers(0, 6, size=(2, 4))
    table = rng.standard_normal((6, 3))
    net = layers.sequential([layers.embedding("emb"), layers.tied_dense("emb")])
    r = rng.standard_normal((2, 4, 6))

    def run(t):
        ctx = layers.Ctx({"emb.table": t}, training=False, rng=None)
        y, back = net(ids, ctx)
        return y, back, ctx

    y, back, ctx = run(table)
    np.testing.assert_allclose(y, table[ids] @ table.T, rtol=1e-12)  # (N, T, V)
    back(r)
    numeric = np.zeros_like(table)
    h = 1e-6
    for idx in np.ndindex(table.shape):
        plus, minus = table.copy(), table.copy()
        plus[idx] += h
        minus[idx] -= h
        numeric[idx] = ((r * run(plus)[0]).sum() - (r * run(minus)[0]).sum()) / (2 * h)
    np.testing.assert_allclose(ctx.grads["emb.table"], numeric, rtol=GRAD_RTOL, atol=GRAD_ATOL)


def test_attention_heads_are_head_major_blocks() -> None:
    """Swapping two heads' query and key columns together leaves the output unchanged (the
    blocks are heads); swapping the query columns alone does not."""
    inputs = attention_inputs(np.random.default_rng(4), np.float64, n=2, t=4, e=4)
    weights = [inputs[r] for r in ROLES]
    y, _ = seq.attention_forward(inputs["x"], inputs["valid"], tuple(weights), 2)
    swap = [2, 3, 0, 1]
    both = list(weights)
    for i in range(5):  # wq, bq, wk, wv, bv: columns of heads 0 and 1 exchanged
        both[i] = weights[i][..., swap]
    both[5] = weights[5][swap]  # output rows follow the value columns
    y2, _ = seq.attention_forward(inputs["x"], inputs["valid"], tuple(both), 2)
    np.testing.assert_allclose(y2, y, rtol=1e-12)
    only_q = list(weights)
    only_q[0] = weights[0][:, swap]
    y3, _ = seq.attention_forward(inputs["x"], inputs["valid"], tuple(only_q), 2)
    assert np.abs(y3 - y).max() > 1e-3


def test_layer_norm_matches_loop_and_uses_biased_variance() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 7))
    gamma, beta = rng.standard_normal(7), rng.standard_normal(7)
    y, _ = seq.layer_norm_forward(x, gamma, beta, 1e-5)
    for idx in np.ndindex(2, 3):
        row = list(x[idx])
        mean = sum(row) / 7
        var = sum((v - mean) ** 2 for v in row) / 7  # divided by E, not E - 1
        want = [
            (v - mean) / math.sqrt(var + 1e-5) * g + b
            for v, g, b in zip(row, gamma, beta, strict=True)
        ]
        np.testing.assert_allclose(y[idx], want, rtol=1e-12)


def test_gelu_is_exact_erf_not_tanh() -> None:
    x = np.linspace(-6, 6, 97)
    y, _ = seq.gelu_forward(x)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    # erf within 2 ulp of the C library's (the test above), i.e. 2 ulp of 1 = 4.4e-16 absolute
    # where erf nears -1: 0.5 x (1 + erf) is then off by up to |x| * 2.2e-16 (the cancellation
    # in 1 + erf, the formula every backend computes), far below the tanh form's 1e-5
    assert np.all(np.abs(y - exact) <= 2.3e-16 * np.abs(x) + 1e-15 * np.abs(exact))
    tanh_form = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    assert np.abs(y - tanh_form).max() > 1e-5  # the approximation is a different function


def test_erf_is_the_c_librarys_within_2_ulp() -> None:
    """The vectorised erf against ``math.erf`` (the C library's) on a dense grid through every
    piece and across each join, near 0 (relative accuracy), at the cut to 1, and at the edges.
    2 ulp: a degree-11 polynomial's rounding in Horner form; a wrong coefficient or piece index
    is off by far more (the pieces are 1/8 wide: a neighbour's value differs by ~1e-2)."""
    joins = np.arange(1 / 16, 6.0, 1 / 8)
    x = np.concatenate([
        np.linspace(-7, 7, 200_001),
        np.geomspace(1e-300, 7, 20_000),
        np.nextafter(joins, 0), joins, np.nextafter(joins, 9),
        [0.0, 5.999999999, 6.0, 6.5, 1e300],
    ])  # fmt: skip
    want = np.array([math.erf(v) for v in x])
    got = seq.erf(x)
    ulps = np.abs(got - want) / np.spacing(np.abs(want))
    assert ulps.max() <= 2, f"{ulps.max()} ulp at x = {x[ulps.argmax()]!r}"
    np.testing.assert_array_equal(seq.erf(-x), -got)  # odd
    edges = seq.erf(np.array([np.inf, -np.inf, np.nan, -0.0]))
    assert edges[:2].tolist() == [1.0, -1.0] and np.isnan(edges[2]) and np.signbit(edges[3])


def test_float32_erf_is_within_1_ulp_of_the_correctly_rounded_value() -> None:
    """float32 in, float32 out, by its own formula (1 - e^(-a^2) t P(t) in float64, rounded
    once): within 1 ulp of ``math.erf`` rounded to float32 on a dense grid, near 0 (relative
    accuracy, across the 1e-4 switch to 2a/sqrt(pi)), at the clamp to 4 and at the edges. 1 ulp:
    a rounding of the float64 value that lands beside the exact one's; a wrong coefficient or a
    lost term is off by hundreds (a fit of degree 8 instead of 10 is 36 ulp out)."""
    x = np.concatenate([
        np.linspace(-7, 7, 400_001), np.geomspace(1e-40, 7, 40_000), -np.geomspace(1e-6, 7, 999),
        np.nextafter(np.float32([1e-4, 4.0]), 0), [1e-4, 4.0, 0.0, 3.4e38],
    ]).astype(np.float32)  # fmt: skip
    want = np.array([math.erf(v) for v in x.astype(np.float64)]).astype(np.float32)
    got = seq.erf(x)
    assert got.dtype == np.float32
    ulps = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want)).astype(np.float64)
    assert ulps.max() <= 1, f"{ulps.max()} ulp at x = {x[ulps.argmax()]!r}"
    np.testing.assert_array_equal(seq.erf(-x), -got)  # odd
    edges = seq.erf(np.float32([np.inf, -np.inf, np.nan, -0.0]))
    assert edges[:2].tolist() == [1.0, -1.0] and np.isnan(edges[2]) and np.signbit(edges[3])


def test_masked_mean_matches_loop() -> None:
    x = np.random.default_rng(6).standard_normal((3, 4, 5))
    valid = _valid(3, 4)
    y, _ = seq.masked_mean_forward(x, valid)
    for i in range(3):
        rows = [x[i, t] for t in range(4) if valid[i, t]]
        want = sum(rows) / len(rows) if rows else np.zeros(5)
        np.testing.assert_allclose(y[i], want, rtol=1e-13)


# --------------------------------------------------------------------------- the edges


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_padding_only_row_attends_to_nothing(dtype) -> None:
    """Every key masked: the head outputs are 0, the output is the output bias; gradients are
    finite and nothing flows to the masked row's input through the weights."""
    inputs = attention_inputs(np.random.default_rng(7), dtype, n=3, t=4, e=6)
    weights = tuple(inputs[r] for r in ROLES)
    y, cache = seq.attention_forward(inputs["x"], inputs["valid"], weights, 2)
    assert np.isfinite(y).all()
    np.testing.assert_array_equal(y[2], np.broadcast_to(inputs["bo"], (4, 6)))
    dx, grads = seq.attention_backward(np.ones_like(y), cache)
    assert np.isfinite(dx).all() and all(np.isfinite(g).all() for g in grads)
    assert not dx[2].any()  # a constant output: no gradient reaches that row


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mean_over_zero_tokens_is_zero(dtype) -> None:
    x = np.full((2, 3, 4), 7.0, dtype=dtype)
    valid = np.array([[False] * 3, [False, False, True]])
    y, cache = seq.masked_mean_forward(x, valid)
    np.testing.assert_array_equal(y, [[0] * 4, [7] * 4])
    dx = seq.masked_mean_backward(np.ones_like(y), cache)
    assert not dx[0].any() and np.isfinite(dx).all()


def test_softmax_is_stable_for_large_scores_in_float32() -> None:
    """Scores of 1e4 overflow a naive exp in float32; the reference subtracts the row max."""
    s = np.array([[1.0e4, 1.0e4 - 1.0, -1.0e4, 5.0e4]], dtype=np.float32)
    valid = np.array([True, True, True, False])  # the largest score is masked
    with np.errstate(over="raise", invalid="raise"):
        p = seq.masked_softmax(s, valid)
    want = np.array([1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1)), 0, 0])
    np.testing.assert_allclose(p[0], want, rtol=1e-6)
    assert p[0, 3] == 0  # a masked key has weight exactly 0


def test_gradient_check_catches_a_wrong_mask() -> None:
    """A planted defect: the padding keys left in the softmax change the output of the rows
    that have padding (and only those), far above the loop comparison's tolerance."""
    inputs = attention_inputs(np.random.default_rng(8), np.float64, n=3, t=4, e=6)
    weights = tuple(inputs[r] for r in ROLES)
    y, _ = seq.attention_forward(inputs["x"], inputs["valid"], weights, 2)
    unmasked, _ = seq.attention_forward(inputs["x"], np.ones((3, 4), bool), weights, 2)
    np.testing.assert_allclose(unmasked[0], y[0], rtol=1e-12)
    assert np.abs(unmasked[1] - y[1]).max() > 1e-3
