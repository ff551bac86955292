"""A parsed, validated workload: what ``rosetta/models/<name>.yaml`` declares, as dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from rosetta.spec.graph import collect_params, count_flops, infer_shape
from rosetta.spec.ops import Node
from rosetta.spec.params import ParamSpec, Shape
from rosetta.spec.params import numel as _numel


@dataclass(frozen=True)
class InputSpec:
    """Per-sample input: shape in canonical layout and element type."""

    shape: Shape  # (C, H, W) for images, (T,) for token ids
    dtype: str  # "float32" | "int32"


@dataclass(frozen=True)
class WeightsRef:
    """An imported model's weights: a ``.npz`` beside its spec and the file's sha256 (its
    canonical weights are these, not a seeded draw)."""

    path: Path  # the spec's folder / the file name the spec gives (a plain name)
    sha256: str


@dataclass(frozen=True)
class DatasetRef:
    """Which data set feeds the workload, with its preprocessing options (e.g. IMDB's)."""

    name: str  # "cifar10" | "imdb" | "random_images"
    options: tuple[tuple[str, object], ...] = ()

    def get(self, key: str, default: object = None) -> object:
        """The value of preprocessing option ``key`` (or ``default``)."""
        return dict(self.options).get(key, default)


@dataclass(frozen=True)
class Loss:
    """Softmax cross-entropy over integer labels, mean over the batch (the only loss so far)."""

    op: str = "softmax_cross_entropy"
    reduction: str = "mean"


@dataclass(frozen=True)
class SGD:
    """SGD with momentum, PyTorch form: buf = momentum*buf + g; w -= lr*buf (nesterov optional)."""

    lr: float
    momentum: float = 0.0
    nesterov: bool = False
    op: str = "sgd"


@dataclass(frozen=True)
class Adam:
    """Adam, Kingma & Ba Algorithm 1: w -= lr * m_hat / (sqrt(v_hat) + eps)."""

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    op: str = "adam"


@dataclass(frozen=True)
class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter; the PyTorch/Optax/Keras form):
    ``w -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * w)``, the decay on the weight
    before the step and never through the moments, and only on the parameters whose role (the
    part of the canonical name after the last dot) is in ``decay``; every other parameter
    (biases, LayerNorm, embeddings) takes the plain Adam step."""

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.01
    decay: tuple[str, ...] = ("kernel",)
    op: str = "adamw"

    def decays(self, name: str) -> bool:
        """Whether the parameter ``name`` (canonical, ``<layer>.<role>``) is decayed."""
        return name.rsplit(".", 1)[-1] in self.decay


Optimizer = SGD | Adam | AdamW


@dataclass(frozen=True)
class GenerateSpec:
    """A decoder's generation run (a profile's ``generate``): greedy decoding of ``new_tokens``
    after prompts of ``prompt_len`` tokens (windows of the test text), at each batch size of
    ``batches``."""

    prompt_len: int
    new_tokens: int
    batches: tuple[int, ...]


@dataclass(frozen=True)
class Profile:
    """How much data and how many passes one run uses; never changes the model.

    Training workloads use ``epochs``, ``train_samples``, ``test_samples``; feature workloads
    use ``batches`` (timed) and ``warmup_batches`` (untimed)."""

    name: str
    batch_size: int
    epochs: int = 0
    train_samples: int = 0
    test_samples: int = 0
    batches: int = 0
    warmup_batches: int = 0
    image_size: int = 0  # features: input height = width (0: the spec's); the model is unchanged
    generate: GenerateSpec | None = None  # a decoder: the generation run after the training run

    def workload_for(self, workload: Workload) -> Workload:
        """``workload`` at this profile's input size (global pooling keeps every parameter)."""
        return workload.at_image_size(self.image_size)

    @property
    def steps_per_epoch(self) -> int:
        """Complete batches per epoch (incomplete batches are dropped, as in the original)."""
        return self.train_samples // self.batch_size


@dataclass(frozen=True)
class Tolerance:
    """How close a backend's array must be to the reference's.

    ``scale="element"``: every element satisfies |a - b| <= atol + rtol * |b| (NumPy's allclose).
    ``scale="max"``: every element satisfies |a - b| <= atol + rtol * max|b|, i.e. relative to the
    tensor's largest magnitude. Float32 gradients need the latter: ReLU and max-pool are not
    differentiable at their kinks, so a pre-activation within rounding of 0 can switch sides
    between two correct implementations and move single gradient entries by ~0.1-1% of the
    tensor's scale (measured), while a wrong term moves them by O(100%).

    ``scale="norm"``: the whole tensor satisfies ||a - b||_2 <= atol * sqrt(n) + rtol * ||b||_2.
    bf16 gradients need it: at bf16's round-off (2^-8) a ReLU or max-pool kink flips ~256x as
    often as at float32's, and each flip moves one unit's whole gradient (up to ~50% of the
    tensor's max, measured on the CNN), while the tensor as a whole stays within ~20%; a wrong
    term moves the norm by O(100%)."""

    rtol: float
    atol: float
    scale: str = "element"  # "element" | "max" | "norm"

    def violation(self, actual: np.ndarray, desired: np.ndarray) -> float:
        """The largest |a - b| / bound over the elements (for ``norm``: the tensor's error norm
        over its bound): <= 1 means within tolerance."""
        a = np.asarray(actual, dtype=np.float64)
        b = np.asarray(desired, dtype=np.float64)
        if a.shape != b.shape:
            return float("inf")
        if self.scale == "norm":
            bound = self.atol * np.sqrt(max(b.size, 1)) + self.rtol * np.linalg.norm(b)
            return float(np.linalg.norm(a - b) / bound)
        ref = np.abs(b) if self.scale == "element" else np.abs(b).max(initial=0.0)
        return float((np.abs(a - b) / (self.atol + self.rtol * ref)).max(initial=0.0))

    def check(self, actual: np.ndarray, desired: np.ndarray, what: str) -> None:
        """Raise ``AssertionError`` naming ``what`` and the worst element if out of tolerance."""
        v = self.violation(actual, desired)
        if not v <= 1.0:
            a = np.asarray(actual, dtype=np.float64)
            b = np.asarray(desired, dtype=np.float64)
            detail = f"shapes {a.shape} vs {b.shape}"
            if a.shape == b.shape:
                i = np.unravel_index(np.argmax(np.abs(a - b)), a.shape) if a.size else ()
                detail = f"worst at {tuple(int(k) for k in i)}: {a[i]!r} vs {b[i]!r}"
            raise AssertionError(f"{what}: {v:.3g}x over tolerance {self} ({detail})")


@dataclass(frozen=True)
class Tolerances:
    """Equivalence bounds for one dtype: forward outputs, loss, gradients, and the change of every
    parameter after k optimiser steps (``p_k - p_0``: comparing the change, not the parameter,
    keeps a wrong update from hiding behind the initial values)."""

    forward: Tolerance
    loss: Tolerance | None = None
    grads: Tolerance | None = None
    params: Tolerance | None = None


@dataclass(frozen=True)
class Workload:
    """Everything a backend needs to build, feed, train and check one workload."""

    name: str
    title: str  # the report's caption for this workload's tables (spec ``title:``)
    order: int  # the report's place of this workload, lower first, ties by name (spec ``order:``)
    description: str
    task: str  # "train" | "features"
    dataset: DatasetRef
    input: InputSpec
    graph: tuple[Node, ...]
    loss: Loss | None
    optimizer: Optimizer | None
    profiles: dict[str, Profile]
    tolerances: dict[str, Tolerances]  # by dtype "float32", "float64"; by policy "bf16"
    source: Path
    weights: WeightsRef | None = None  # an imported model's weights file (``rosetta import``)
    #: where an imported model came from (spec ``provenance:``: its file's name and sha256, the
    #: producer, the opset, the check against the file): data, shown and recorded, never run
    provenance: tuple[tuple[str, object], ...] = ()

    @cached_property
    def output_shape(self) -> Shape:
        """Per-sample output shape (logits for ``train``, features for ``features``)."""
        return infer_shape(self.graph, self.input.shape)

    @cached_property
    def param_specs(self) -> tuple[ParamSpec, ...]:
        """Every parameter and buffer, in graph order, with canonical names."""
        return tuple(collect_params(self.graph, self.input.shape))

    @property
    def num_params(self) -> int:
        """Trainable parameters (BatchNorm running statistics are buffers, not counted)."""
        return sum(_numel(p.shape) for p in self.param_specs if p.trainable)

    @property
    def num_buffers(self) -> int:
        """Non-trainable tensor elements (BatchNorm running mean and variance)."""
        return sum(_numel(p.shape) for p in self.param_specs if not p.trainable)

    def flops_per_sample(self, input_shape: Shape | None = None) -> int:
        """Forward FLOPs per sample, at the spec's input shape or another spatial size."""
        return count_flops(self.graph, input_shape or self.input.shape)

    def at_image_size(self, size: int) -> Workload:
        """The same model on ``size x size`` images (feature workloads end in a global pooling,
        so every parameter keeps its shape); ``size`` 0 or the spec's own returns ``self``."""
        if len(self.input.shape) != 3 or size in (0, self.input.shape[1]):
            return self
        changed = replace(
            self, input=InputSpec((self.input.shape[0], size, size), self.input.dtype)
        )
        if changed.param_specs != self.param_specs:
            raise ValueError(f"workload {self.name!r} changes its parameters at {size}x{size}")
        return changed

    def profile(self, name: str) -> Profile:
        """The named profile; raises ``KeyError`` listing the valid names."""
        if name not in self.profiles:
            raise KeyError(
                f"workload {self.name!r} has no profile {name!r}; valid: {sorted(self.profiles)}"
            )
        return self.profiles[name]
