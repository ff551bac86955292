"""GRU of the NumPy reference, in the Keras/cuDNN convention (the canonical one of Rosetta).

Parameters (canonical names and layouts of the spec):

- ``kernel`` (E, 3H): input weights, column blocks in gate order ``[z | r | h]``;
- ``recurrent_kernel`` (H, 3H): recurrent weights, same gate order;
- ``bias_input`` (3H,) and ``bias_recurrent`` (3H,): two separate biases, same gate order
  (Keras ``reset_after=True``, cuDNN and PyTorch semantics: the reset gate multiplies the
  *recurrent projection including its bias*, not the previous state).

One step, with ``x_t`` (N, E), previous state ``h`` (N, H) and ``split`` cutting 3H into three H
blocks::

    xz, xr, xh = split(x_t @ kernel + bias_input)
    hz, hr, hh = split(h @ recurrent_kernel + bias_recurrent)
    z = sigmoid(xz + hz)          # update gate
    r = sigmoid(xr + hr)          # reset gate
    n = tanh(xh + r * hh)         # candidate state
    h_new = z * h + (1 - z) * n

The initial state is zero and the op returns the last step's state (N, H).

Note for the PyTorch backend: ``torch.nn.GRU`` computes the same function with gates ordered
``r, z, n`` and ``h' = (1 - z) * n + z * h``. Map the canonical parameters by reordering the gate
blocks and transposing: with ``K = kernel`` and blocks ``K_z, K_r, K_h`` (each E x H),
``weight_ih_l0 = concat([K_r, K_z, K_h], axis=1).T`` (3H, E); likewise ``weight_hh_l0`` from
``recurrent_kernel``, and ``bias_ih_l0 = [b_r, b_z, b_h]`` from ``bias_input``, ``bias_hh_l0`` from
``bias_recurrent``. PyTorch's ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`` is our
``tanh(xh + r * hh)``. Inputs here are batch-major (N, T, E) (``batch_first=True`` in PyTorch).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rosetta.backends.numpy_ref.nn import logistic

__all__ = ["GRUCache", "gru_forward", "gru_backward", "LSTMCache", "lstm_forward", "lstm_backward"]


@dataclass(frozen=True)
class GRUCache:
    x: np.ndarray  # (N, T, E)
    kernel: np.ndarray  # (E, 3H)
    recurrent_kernel: np.ndarray  # (H, 3H)
    hs: np.ndarray  # (T + 1, N, H): hs[0] = h0 = 0, hs[t + 1] = state after step t
    zs: np.ndarray  # (T, N, H) update gates
    rs: np.ndarray  # (T, N, H) reset gates
    ns: np.ndarray  # (T, N, H) candidate states
    hhs: np.ndarray  # (T, N, H) recurrent projection of the h block (incl. its bias)


def gru_forward(
    x: np.ndarray,
    kernel: np.ndarray,
    recurrent_kernel: np.ndarray,
    bias_input: np.ndarray,
    bias_recurrent: np.ndarray,
) -> tuple[np.ndarray, GRUCache]:
    """Run the GRU over batch-major ``x`` (N, T, E) from a zero state; return ``h_T`` (N, H).

    ``kernel`` (E, 3H), ``recurrent_kernel`` (H, 3H), ``bias_input`` and ``bias_recurrent``
    (3H,), gate blocks ordered ``[z | r | h]`` (see the module docstring for the equations).
    """
    n_batch, t_steps, e = x.shape
    hsz = recurrent_kernel.shape[0]
    if kernel.shape != (e, 3 * hsz) or recurrent_kernel.shape != (hsz, 3 * hsz):
        raise ValueError(
            f"gru: kernel {kernel.shape} / recurrent_kernel {recurrent_kernel.shape} do not "
            f"match input {x.shape} (expected ({e}, 3H) and (H, 3H))"
        )
    if bias_input.shape != (3 * hsz,) or bias_recurrent.shape != (3 * hsz,):
        raise ValueError(f"gru: biases must be ({3 * hsz},)")
    # input projections for all steps at once: (N, T, E) @ (E, 3H) -> (N, T, 3H)
    xproj = x @ kernel + bias_input
    hs = np.zeros((t_steps + 1, n_batch, hsz), dtype=x.dtype)
    zrs = np.empty((t_steps, n_batch, 2 * hsz), dtype=x.dtype)  # [z | r] of every step
    ns = np.empty((t_steps, n_batch, hsz), dtype=x.dtype)
    hhs = np.empty_like(ns)
    for t in range(t_steps):
        h = hs[t]  # (N, H)
        hproj = h @ recurrent_kernel + bias_recurrent  # (N, H) @ (H, 3H) -> (N, 3H)
        xp = xproj[:, t]  # (N, 3H)
        zr = zrs[t]
        logistic(xp[:, : 2 * hsz] + hproj[:, : 2 * hsz], out=zr)  # both gates in one call
        z, r = zr[:, :hsz], zr[:, hsz:]
        hh = hproj[:, 2 * hsz :]
        n = np.tanh(xp[:, 2 * hsz :] + r * hh)
        hs[t + 1] = z * h + (1 - z) * n
        ns[t], hhs[t] = n, hh
    cache = GRUCache(
        x=x, kernel=kernel, recurrent_kernel=recurrent_kernel, hs=hs,
        zs=zrs[..., :hsz], rs=zrs[..., hsz:], ns=ns, hhs=hhs,
    )  # fmt: skip
    return hs[t_steps].copy(), cache


def gru_backward(
    dh_last: np.ndarray, cache: GRUCache
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Backprop through time from ``dh_last`` (N, H), the gradient of the returned state.

    Returns ``(dx, dkernel, drecurrent_kernel, dbias_input, dbias_recurrent)`` with shapes
    (N, T, E), (E, 3H), (H, 3H), (3H,), (3H,).
    """
    x, rk = cache.x, cache.recurrent_kernel
    n_batch, t_steps, e = x.shape
    hsz = rk.shape[0]
    # gradients of the pre-activations, gate blocks [z | r | h]
    dxproj = np.empty((n_batch, t_steps, 3 * hsz), dtype=x.dtype)  # wrt x_t @ kernel + b_in
    dhproj = np.empty((t_steps, n_batch, 3 * hsz), dtype=x.dtype)  # wrt h @ rk + b_rec
    dh = dh_last.astype(x.dtype, copy=True)  # (N, H), gradient wrt the state h_{t+1}
    for t in reversed(range(t_steps)):
        h, z, r, n, hh = cache.hs[t], cache.zs[t], cache.rs[t], cache.ns[t], cache.hhs[t]
        dxp, dhp = dxproj[:, t], dhproj[t]  # (N, 3H) each, blocks [z | r | h]
        # h_new = z * h + (1 - z) * n; n = tanh(a_n), a_n = xh + r * hh
        da_n = dh * (1 - z) * (1 - n * n)
        # z = sigmoid(a_z), r = sigmoid(a_r)
        np.multiply(dh * (h - n), z * (1 - z), out=dxp[:, :hsz])  # da_z
        np.multiply(da_n * hh, r * (1 - r), out=dxp[:, hsz : 2 * hsz])  # da_r
        dxp[:, 2 * hsz :] = da_n
        dhp[:, : 2 * hsz] = dxp[:, : 2 * hsz]
        np.multiply(da_n, r, out=dhp[:, 2 * hsz :])  # dhh
        dh = dh * z + dhp @ rk.T  # (N, 3H) @ (3H, H) -> (N, H)
    # every step's recurrent-weight gradient in one product: (T, N, H) -> (T*N, H) and
    # (T, N, 3H) -> (T*N, 3H), contracting time and batch together
    drk = cache.hs[:-1].reshape(-1, hsz).T @ dhproj.reshape(-1, 3 * hsz)  # (H, 3H)
    dbr = dhproj.reshape(-1, 3 * hsz).sum(axis=0)  # (3H,)
    # (N, T, 3H) -> (N*T, 3H) and (N, T, E) -> (N*T, E) to contract batch and time together
    dxproj_flat = dxproj.reshape(-1, 3 * hsz)
    dkernel = x.reshape(-1, e).T @ dxproj_flat  # (E, N*T) @ (N*T, 3H) -> (E, 3H)
    dbi = dxproj_flat.sum(axis=0)  # (3H,)
    dx = dxproj @ cache.kernel.T  # (N, T, 3H) @ (3H, E) -> (N, T, E)
    return dx, dkernel, drk, dbi, dbr


# --------------------------------------------------------------------------- LSTM


@dataclass(frozen=True)
class LSTMCache:
    x: np.ndarray  # (N, T, E)
    kernel: np.ndarray  # (E, 4H)
    recurrent_kernel: np.ndarray  # (H, 4H)
    hs: np.ndarray  # (T + 1, N, H): hs[0] = 0, hs[t + 1] = state after step t
    cs: np.ndarray  # (T + 1, N, H): the cells, cs[0] = 0
    gates: np.ndarray  # (T, N, 4H): sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)


def lstm_forward(
    x: np.ndarray, kernel: np.ndarray, recurrent_kernel: np.ndarray, bias: np.ndarray
) -> tuple[np.ndarray, LSTMCache]:
    """Run the LSTM over batch-major ``x`` (N, T, E) from zero state and cell; return ``h_T``
    (N, H). ``kernel`` (E, 4H), ``recurrent_kernel`` (H, 4H), ``bias`` (4H,), gate blocks
    ``[i | f | g | o]``::

        a = x_t @ kernel + h @ recurrent_kernel + bias;  i, f, g, o = split(a)
        c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c')
    """
    n_batch, t_steps, e = x.shape
    hsz = recurrent_kernel.shape[0]
    if kernel.shape != (e, 4 * hsz) or recurrent_kernel.shape != (hsz, 4 * hsz):
        raise ValueError(
            f"lstm: kernel {kernel.shape} / recurrent_kernel {recurrent_kernel.shape} do not "
            f"match input {x.shape} (expected ({e}, 4H) and (H, 4H))"
        )
    if bias.shape != (4 * hsz,):
        raise ValueError(f"lstm: bias must be ({4 * hsz},)")
    xproj = x @ kernel + bias  # (N, T, E) @ (E, 4H) -> (N, T, 4H)
    hs = np.zeros((t_steps + 1, n_batch, hsz), dtype=x.dtype)
    cs = np.zeros_like(hs)
    gates = np.empty((t_steps, n_batch, 4 * hsz), dtype=x.dtype)
    for t in range(t_steps):
        a = xproj[:, t] + hs[t] @ recurrent_kernel  # (N, 4H)
        i, f = logistic(a[:, :hsz]), logistic(a[:, hsz : 2 * hsz])
        g, o = np.tanh(a[:, 2 * hsz : 3 * hsz]), logistic(a[:, 3 * hsz :])
        cs[t + 1] = f * cs[t] + i * g
        hs[t + 1] = o * np.tanh(cs[t + 1])
        gates[t] = np.concatenate([i, f, g, o], axis=1)
    cache = LSTMCache(x=x, kernel=kernel, recurrent_kernel=recurrent_kernel, hs=hs, cs=cs,
                      gates=gates)  # fmt: skip
    return hs[t_steps].copy(), cache


def lstm_backward(
    dh_last: np.ndarray, cache: LSTMCache
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Backprop through time from ``dh_last`` (N, H). Returns ``(dx, dkernel,
    drecurrent_kernel, dbias)`` with shapes (N, T, E), (E, 4H), (H, 4H), (4H,)."""
    x, rk = cache.x, cache.recurrent_kernel
    n_batch, t_steps, e = x.shape
    hsz = rk.shape[0]
    da_all = np.empty((n_batch, t_steps, 4 * hsz), dtype=x.dtype)  # wrt the pre-activations
    drk = np.zeros_like(rk)
    dh = dh_last.astype(x.dtype, copy=True)  # (N, H), wrt h_{t+1}
    dc = np.zeros_like(dh)  # wrt c_{t+1}, from the step after
    for t in reversed(range(t_steps)):
        gt = cache.gates[t]
        i, f, g, o = (gt[:, k * hsz : (k + 1) * hsz] for k in range(4))
        tc = np.tanh(cache.cs[t + 1])
        # h' = o * tanh(c'): to o and (through tanh) to c'
        do = dh * tc
        dc = dc + dh * o * (1 - tc * tc)
        # c' = f * c + i * g
        di, df, dg = dc * g, dc * cache.cs[t], dc * i
        da = np.concatenate(
            [di * i * (1 - i), df * f * (1 - f), dg * (1 - g * g), do * o * (1 - o)], axis=1
        )  # (N, 4H)
        da_all[:, t] = da
        drk += cache.hs[t].T @ da  # (H, N) @ (N, 4H) -> (H, 4H)
        dh = da @ rk.T  # (N, 4H) @ (4H, H) -> (N, H)
        dc = dc * f
    flat = da_all.reshape(-1, 4 * hsz)  # (N, T, 4H) -> (N*T, 4H)
    dkernel = x.reshape(-1, e).T @ flat  # (E, N*T) @ (N*T, 4H) -> (E, 4H)
    dx = da_all @ cache.kernel.T  # (N, T, 4H) @ (4H, E) -> (N, T, E)
    return dx, dkernel, drk, flat.sum(axis=0)
