"""The bytes one step must move at least, from the spec alone: the roofline's denominator.

A step's arithmetic intensity is its FLOPs over the bytes it cannot avoid moving between the
cores and memory. This module counts those bytes, per step of ``batch`` samples, as a lower
bound (caches that hold a tensor between producer and consumer, re-reads of a tensor larger than
the cache and a framework's own temporaries are *not* counted):

- **weights**: every parameter and buffer read once; training also writes each parameter once
  (the update) and writes and reads its gradient once: ``4 x`` the trainable parameters. The
  optimiser's rule touches every parameter, zero gradients too (momentum and Adam's moments
  decay), so an embedding table counts whole. Weights are stored in fp32 under both precision
  policies (bf16 keeps fp32 master weights), except at inference in bf16, where a backend may
  keep a bf16 copy: 2 bytes.
- **optimiser state**: read and written once per step (SGD with momentum: one buffer per
  parameter; Adam: two; plain SGD: none), fp32.
- **activations**: every *materialised* tensor written once (at inference); in training also
  read once by the backward and its gradient written once (``3 x``). A tensor is materialised
  where an op makes a new one: an op whose output has as many elements as its input and that
  does at most 2 FLOP per element (ReLU, dropout, flatten, batch norm at inference, a residual's
  add) fuses into its producer and adds nothing. A GRU's saved state is every step's hidden
  state (T x H), not only the last it returns. Activations are fp32, or bf16 (2 bytes) in bf16.
- **input**: the batch read once, at the spec's input dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

from rosetta.spec.graph import walk
from rosetta.spec.params import Shape, numel
from rosetta.spec.workload import Workload

#: bytes per element of a tensor kind, per precision policy
ACTIVATION_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "tf32": 4}
MASTER_BYTES = 4  # parameters, gradients and optimiser state: fp32 under every policy
INPUT_BYTES = {"float32": 4, "int32": 4, "float64": 8, "uint8": 1, "int64": 8}
#: optimiser state tensors per parameter
STATE_PER_PARAM = {"adam": 2}


@dataclass(frozen=True)
class StepTraffic:
    """The minimum bytes of one step of ``batch`` samples, by what moves them."""

    batch: int
    precision: str
    weights: int  # parameters (and for training their gradients and the update)
    optimiser: int  # optimiser state, read and written
    activations: int  # materialised activations (training: written, read back, gradient)
    input: int  # the batch itself

    @property
    def total(self) -> int:
        """Everything a step must move, bytes."""
        return self.weights + self.optimiser + self.activations + self.input


def saved_elements(op: object, in_shape: Shape, out_shape: Shape) -> int:
    """Elements per sample that ``op`` materialises (0 where it fuses into its producer)."""
    if getattr(op, "OP", "") == "gru":
        return in_shape[0] * op.units  # type: ignore[attr-defined]  # every step's state (T, H)
    if getattr(op, "VARIADIC", False):  # add, concat: their output, read by what follows
        return numel(out_shape)
    n_in, n_out = numel(in_shape), numel(out_shape)
    if n_out == n_in and op.flops(in_shape) <= 2 * n_in:  # type: ignore[attr-defined]
        return 0  # elementwise or a reshape: fused
    return n_out


def activation_elements(workload: Workload, input_shape: Shape | None = None) -> int:
    """Materialised activation elements per sample (:func:`saved_elements` over every leaf op)."""
    return sum(
        saved_elements(op, i, o)
        for op, i, o in walk(workload.graph, input_shape or workload.input.shape)
    )


def step_traffic(
    workload: Workload, batch: int, precision: str = "fp32", input_shape: Shape | None = None
) -> StepTraffic:
    """The bytes one step of ``batch`` samples must move at least (module docstring), at the
    spec's input shape or ``input_shape``; ``ValueError`` for a precision it does not know."""
    if precision not in ACTIVATION_BYTES:
        raise ValueError(f"unknown precision {precision!r}; known: {sorted(ACTIVATION_BYTES)}")
    shape = input_shape or workload.input.shape
    act = ACTIVATION_BYTES[precision]
    params = workload.num_params
    buffers = workload.num_buffers
    train = workload.task == "train"
    if train:
        weights = 4 * params * MASTER_BYTES + buffers * MASTER_BYTES
        opt = workload.optimizer
        per = 0
        if opt is not None:
            per = STATE_PER_PARAM.get(opt.op, 1 if getattr(opt, "momentum", 0) else 0)
        optimiser = 2 * per * params * MASTER_BYTES
    else:
        weights = (params + buffers) * (act if precision != "fp32" else MASTER_BYTES)
        optimiser = 0
    passes = 3 if train else 1
    activations = passes * batch * activation_elements(workload, shape) * act
    inp = batch * numel(shape) * INPUT_BYTES.get(workload.input.dtype, 4)
    return StepTraffic(batch, precision, weights, optimiser, activations, inp)
