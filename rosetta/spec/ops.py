"""The ops of the neutral spec, as frozen dataclasses, with their shape, parameter and FLOP rules.

One class per op. Shapes are per sample (no batch axis) in the canonical layout: images are
channels-first ``(C, H, W)``, token sequences ``(T,)``, embedded sequences ``(T, E)``. Each op
answers three questions, all from data alone:

- ``out_shape(in_shape)``: shape inference (raises ``ValueError`` when the input does not fit);
- ``param_specs(in_shape)``: the parameters it owns, with canonical names, layouts and inits;
- ``flops(in_shape)``: forward FLOPs per sample (conventions: ``rosetta/models/README.md``).

Each op's YAML fields are declared on the dataclass itself (``spec_field(kind)``,
``init_field(names)``, see :mod:`rosetta.spec.fields`) and ``@register("name")`` enters it in
:data:`OPS`: the loader derives its schema from there, so adding an op is adding one class.

Canonical parameter layouts (backends convert only at their ``set_params/get_params`` boundary):
conv2d kernel ``OIHW``; dense kernel ``IO`` (rows in the producer's ``C, H, W`` flatten order);
embedding table ``VE``; GRU kernel ``E,3H`` and recurrent kernel ``H,3H`` with gate blocks
``z | r | h``, two biases ``3H`` each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rosetta.spec.fields import init_field, spec_field
from rosetta.spec.graph import collect_params, count_flops, infer_shape
from rosetta.spec.init import Init
from rosetta.spec.params import ParamSpec, Shape
from rosetta.spec.params import numel as _numel

__all__ = ["OPS", "FieldValueError", "Node", "ParamSpec", "Probe", "Shape", "register"]

#: op name in the YAML -> class; the loader and every backend dispatch on these.
OPS: dict[str, type] = {}
_T = TypeVar("_T", bound=type)


@dataclass(frozen=True)
class Probe:
    """One tiny graph that checks one op on every backend, no workload needed
    (``rosetta.spec.probes`` wraps it: an input of kind ``input``, the op with ``fields``, a head
    that fits its ``output``, a loss and one optimiser; conformance runs it against the float64
    reference: forward, gradients, optimiser steps)."""

    case: str  # what it exercises, e.g. "asymmetric padding, stride (2, 1), no bias"
    fields: Mapping[str, Any] = field(default_factory=dict)  # the op's YAML fields
    #: image (3, 6, 6) | image4: (4, 6, 6), a 1x1 conv's | features (12,) | wide: 12 features
    #: spanning about [-8, 8] | tokens (8,) ids | sequence (8, 8)
    input: str = "image"
    output: str = "image"  # image | vector | sequence: what the op returns (picks the head)
    #: a variadic op's inputs: one layer list per input, each reading the probe's input (an
    #: empty list: that input itself); empty for an op of one input
    inputs: tuple[tuple[Mapping[str, Any], ...], ...] = ()


def register(name: str, probes: tuple[Probe, ...] = ()) -> Callable[[_T], _T]:
    """Class decorator: enter an op dataclass in :data:`OPS` under its YAML name ``name``, with
    the tiny graphs (:class:`Probe`) that check it on every backend (``PROBES``)."""

    def deco(cls: _T) -> _T:
        if name in OPS:
            raise ValueError(f"op {name!r} registered twice")
        cls.OP = name  # type: ignore[attr-defined]
        cls.PROBES = probes  # type: ignore[attr-defined]
        OPS[name] = cls
        return cls

    return deco


# the probes' initialisers: biases and norms away from 0 and 1, so a swapped or dropped term shows
_BIAS = {"dist": "normal", "mean": 0.0, "std": 0.1}
_SCALE = {"dist": "uniform", "low": 0.8, "high": 1.2}
_TABLE = {"dist": "uniform", "low": -0.5, "high": 0.5}


class FieldValueError(ValueError):
    """An input shape an op refuses because of one of its own fields (``field``): the loader
    names that field (``layers[3].heads``) in its one-line error."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _conv_out(size: int, k: int, s: int, lo: int, hi: int) -> int:
    return (size + lo + hi - k) // s + 1


def _need_rank(op: str, in_shape: Shape, rank: int, what: str) -> None:
    if len(in_shape) != rank:
        raise ValueError(f"{op} expects a {what} input, got shape {in_shape}")


@register(
    "conv2d",
    probes=(
        Probe("3x3, stride 1, padding 1, bias", {"name": "conv", "out_channels": 4,
              "kernel": [3, 3], "stride": [1, 1], "padding": [1, 1, 1, 1], "bias": True,
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}}),
        Probe("3x2 kernel, stride (2, 1), asymmetric padding, no bias", {"name": "conv",
              "out_channels": 2, "kernel": [3, 2], "stride": [2, 1], "padding": [0, 1, 1, 0],
              "bias": False, "init": {"kernel": "glorot_uniform"}}),
        Probe("depthwise 3x3 (groups = channels), stride 2, padding 1, bias", {"name": "conv",
              "out_channels": 3, "kernel": [3, 3], "stride": [2, 2], "padding": [1, 1, 1, 1],
              "bias": True, "groups": 3, "init": {"kernel": "glorot_uniform", "bias": _BIAS}}),
        Probe("depthwise, channel multiplier 2, asymmetric padding, no bias", {"name": "conv",
              "out_channels": 6, "kernel": [3, 2], "stride": [1, 1], "padding": [0, 1, 1, 0],
              "bias": False, "groups": 3, "init": {"kernel": "glorot_uniform"}}),
        Probe("grouped: 2 groups of 2 channels, 3x3 (a ResNeXt block's)", {"name": "conv",
              "out_channels": 4, "kernel": [3, 3], "stride": [1, 1], "padding": [1, 1, 1, 1],
              "bias": True, "groups": 2, "init": {"kernel": "glorot_uniform", "bias": _BIAS}},
              "image4"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class Conv2D:
    """2-D cross-correlation with explicit zero padding ``(top, bottom, left, right)``.

    ``groups`` (default 1) splits the input channels and the outputs into that many groups, each
    output group reading its own input group (ONNX ``Conv``'s ``group``, PyTorch's ``groups``):
    the kernel is ``(O, C / groups, KH, KW)``, output channel ``o`` in group ``o // (O /
    groups)``. ``groups`` = channels is a depthwise convolution (MobileNet's)."""

    name: str = spec_field("str")
    out_channels: int = spec_field("posint")
    kernel: tuple[int, int] = spec_field("pair")
    stride: tuple[int, int] = spec_field("pair")
    padding: tuple[int, int, int, int] = spec_field("quad")
    bias: bool = spec_field("bool")
    init: dict[str, Init] = init_field("kernel", "bias")
    groups: int = spec_field("posint", optional=True, default=1)

    def out_shape(self, in_shape: Shape) -> Shape:
        _need_rank("conv2d", in_shape, 3, "(C, H, W)")
        c, h, w = in_shape
        if c % self.groups or self.out_channels % self.groups:
            raise FieldValueError(
                "groups",
                f"conv2d {self.name}: groups {self.groups} must divide both the input channels "
                f"({c}) and out_channels ({self.out_channels})",
            )
        t, b, left, right = self.padding
        ho = _conv_out(h, self.kernel[0], self.stride[0], t, b)
        wo = _conv_out(w, self.kernel[1], self.stride[1], left, right)
        if ho < 1 or wo < 1:
            raise ValueError(
                f"conv2d {self.name}: kernel {self.kernel} does not fit input {in_shape}"
            )
        return (self.out_channels, ho, wo)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        c = in_shape[0] // self.groups  # the input channels each output reads
        kh, kw = self.kernel
        specs = [
            ParamSpec(
                f"{self.name}.kernel",
                (self.out_channels, c, kh, kw),
                "OIHW",
                self.init["kernel"],
                fan_in=c * kh * kw,
                fan_out=self.out_channels * kh * kw,
            )
        ]
        if self.bias:
            specs.append(
                ParamSpec(f"{self.name}.bias", (self.out_channels,), "O", self.init["bias"])
            )
        return specs

    def flops(self, in_shape: Shape) -> int:
        o, ho, wo = self.out_shape(in_shape)
        macs = o * ho * wo * (in_shape[0] // self.groups) * self.kernel[0] * self.kernel[1]
        return 2 * macs + (o * ho * wo if self.bias else 0)


@register(
    "maxpool2d",
    probes=(
        Probe("2x2, stride 2", {"kernel": [2, 2], "stride": [2, 2], "padding": [0, 0, 0, 0]}),
        Probe("3x3, stride 2, padded (-inf)", {"kernel": [3, 3], "stride": [2, 2],
              "padding": [1, 1, 1, 1]}),
        Probe("3x3, stride 2, asymmetric padding", {"kernel": [3, 3], "stride": [2, 2],
              "padding": [0, 1, 1, 0]}),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class MaxPool2D:
    """Max pooling; padded cells count as -inf (never selected)."""

    kernel: tuple[int, int] = spec_field("pair")
    stride: tuple[int, int] = spec_field("pair")
    padding: tuple[int, int, int, int] = spec_field("quad")

    def out_shape(self, in_shape: Shape) -> Shape:
        _need_rank("maxpool2d", in_shape, 3, "(C, H, W)")
        c, h, w = in_shape
        t, b, left, right = self.padding
        if max(t, b) >= self.kernel[0] or max(left, right) >= self.kernel[1]:
            raise ValueError(f"maxpool2d padding {self.padding} must be smaller than the kernel")
        ho = _conv_out(h, self.kernel[0], self.stride[0], t, b)
        wo = _conv_out(w, self.kernel[1], self.stride[1], left, right)
        if ho < 1 or wo < 1:
            raise ValueError(f"maxpool2d kernel {self.kernel} does not fit input {in_shape}")
        return (c, ho, wo)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        c, ho, wo = self.out_shape(in_shape)
        return c * ho * wo * (self.kernel[0] * self.kernel[1] - 1)  # comparisons


@register(
    "avgpool2d",
    probes=(
        Probe("2x2, stride 2", {"kernel": [2, 2], "stride": [2, 2], "padding": [0, 0, 0, 0],
              "count_include_pad": True}),
        Probe("3x3, stride 2, padding 1, padded zeros counted", {"kernel": [3, 3],
              "stride": [2, 2], "padding": [1, 1, 1, 1], "count_include_pad": True}),
        Probe("3x3, stride 1, asymmetric padding, padded cells not counted", {"kernel": [3, 3],
              "stride": [1, 1], "padding": [0, 1, 2, 0], "count_include_pad": False}),
        Probe("3x3, stride 2, padding 1, padded cells not counted", {"kernel": [3, 3],
              "stride": [2, 2], "padding": [1, 1, 1, 1], "count_include_pad": False}),
        Probe("3x2, stride (1, 2), asymmetric padding, padded zeros counted", {"kernel": [3, 2],
              "stride": [1, 2], "padding": [2, 0, 0, 1], "count_include_pad": True}),
        Probe("3x3, stride 1, padding 1 (Keras' exact 'same'), padded cells not counted",
              {"kernel": [3, 3], "stride": [1, 1], "padding": [1, 1, 1, 1],
               "count_include_pad": False}),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class AvgPool2D:
    """Average pooling over ``kernel`` windows with explicit zero padding ``(top, bottom, left,
    right)``, each smaller than the kernel along its axis (so every window holds a real cell).

    ``count_include_pad`` is PyTorch's and ONNX's flag: true divides every window's sum by
    ``kh * kw`` (padded zeros counted); false divides it by the number of real (unpadded) cells
    in that window. Output size as conv2d's (floor)."""

    kernel: tuple[int, int] = spec_field("pair")
    stride: tuple[int, int] = spec_field("pair")
    padding: tuple[int, int, int, int] = spec_field("quad")
    count_include_pad: bool = spec_field("bool")

    def out_shape(self, in_shape: Shape) -> Shape:
        _need_rank("avgpool2d", in_shape, 3, "(C, H, W)")
        c, h, w = in_shape
        t, b, left, right = self.padding
        if max(t, b) >= self.kernel[0] or max(left, right) >= self.kernel[1]:
            raise ValueError(f"avgpool2d padding {self.padding} must be smaller than the kernel")
        ho = _conv_out(h, self.kernel[0], self.stride[0], t, b)
        wo = _conv_out(w, self.kernel[1], self.stride[1], left, right)
        if ho < 1 or wo < 1:
            raise ValueError(f"avgpool2d kernel {self.kernel} does not fit input {in_shape}")
        return (c, ho, wo)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        c, ho, wo = self.out_shape(in_shape)
        return c * ho * wo * self.kernel[0] * self.kernel[1]  # kh*kw - 1 adds and 1 division


@register(
    "relu",
    probes=(Probe("elementwise on an image"),),
)  # fmt: skip
@dataclass(frozen=True)
class ReLU:
    """max(x, 0), elementwise."""

    def out_shape(self, in_shape: Shape) -> Shape:
        return in_shape

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        return _numel(in_shape)


@register(
    "sigmoid",
    probes=(
        Probe("elementwise on an image"),
        Probe("on a sequence (T, E)", {}, "sequence", "sequence"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class Sigmoid:
    """The logistic function ``1 / (1 + exp(-x))``, elementwise (a gate of the decoder's MLPs and
    of GRU-like cells; exact, never the piecewise-linear "hard" form)."""

    def out_shape(self, in_shape: Shape) -> Shape:
        return in_shape

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        return _numel(in_shape)  # 1 per element, as a GRU gate's sigmoid counts


@register(
    "tanh",
    probes=(
        Probe("elementwise on an image"),
        Probe("on a sequence (T, E)", {}, "sequence", "sequence"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class Tanh:
    """The hyperbolic tangent, elementwise (an LSTM's and a GRU's candidate activation)."""

    def out_shape(self, in_shape: Shape) -> Shape:
        return in_shape

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        return _numel(in_shape)  # 1 per element, as a GRU's tanh counts


@register(
    "softmax",
    probes=(
        Probe("over features spanning about [-8, 8]", {}, "wide", "vector"),
        Probe("over a sequence's features (T, E)", {}, "sequence", "sequence"),
        Probe("over an image's width (the last axis of C, H, W)"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class Softmax:
    """``exp(x - max) / sum(exp(x - max))`` over the last canonical per-sample axis: a vector's
    features, a sequence's ``E`` (each position apart), an image's ``W`` (each channel and row
    apart), whatever layout a backend holds it in (ONNX ``Softmax``, ``axis=-1``, opset 13)."""

    def out_shape(self, in_shape: Shape) -> Shape:
        return in_shape

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        # per element: subtract the max, exp (counted as 1), add to the sum, divide; the max's
        # comparisons are not counted (as attention's softmax)
        return 4 * _numel(in_shape)


@register(
    "hardswish",
    probes=(Probe("elementwise on features spanning both kinks (-3, 3)", {}, "wide", "vector"),),
)  # fmt: skip
@dataclass(frozen=True)
class HardSwish:
    """``x * min(max(x + 3, 0), 6) / 6``, elementwise (MobileNetV3's activation; ONNX
    ``HardSwish``). Its gradient at the kinks is PyTorch's, the middle piece's ``x / 3 + 1/2``
    (-1/2 at x = -3, 3/2 at x = 3)."""

    def out_shape(self, in_shape: Shape) -> Shape:
        return in_shape

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        return 4 * _numel(in_shape)  # add, clamp (counted as 1), multiply, divide


@register(
    "clip",
    probes=(
        Probe("ReLU6: [0, 6] on features crossing both bounds", {"min": 0.0, "max": 6.0}, "wide",
              "vector"),
        Probe("[-0.2, 0.3] on an image", {"min": -0.2, "max": 0.3}),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class Clip:
    """``min(max(x, min), max)``, elementwise (``ReLU6`` is ``[0, 6]``; ONNX ``Clip``). The
    gradient is 1 where ``min <= x <= max`` (the bounds included, as PyTorch's ``clamp``),
    else 0."""

    min: float = spec_field("float")
    max: float = spec_field("float")

    def out_shape(self, in_shape: Shape) -> Shape:
        if not self.min < self.max:
            raise FieldValueError("max", f"clip: max {self.max} is not above min {self.min}")
        return in_shape

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        return 2 * _numel(in_shape)  # two comparisons


@register(
    "dropout",
    probes=(Probe("rate 0.5, off in the gate", {"rate": 0.5}),),
)  # fmt: skip
@dataclass(frozen=True)
class Dropout:
    """Inverted dropout: at training, keep with probability 1 - rate and scale by 1/(1 - rate);
    identity at evaluation (and in the equivalence gate, where masks cannot be shared)."""

    rate: float = spec_field("rate")

    def out_shape(self, in_shape: Shape) -> Shape:
        return in_shape

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        return 0  # forward FLOPs are counted in inference mode


@register(
    "flatten",
    probes=(Probe("channel-major (C, H, W) -> C*H*W", {"order": "CHW"}, output="vector"),),
)  # fmt: skip
@dataclass(frozen=True)
class Flatten:
    """(C, H, W) -> (C*H*W,) in channel-major order (the only order the spec allows: ``CHW``)."""

    order: str = spec_field("CHW", default="CHW")

    def out_shape(self, in_shape: Shape) -> Shape:
        return (_numel(in_shape),)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        return 0


@register(
    "dense",
    probes=(
        Probe("on features, bias", {"name": "fc", "units": 5, "bias": True,
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}}, "features", "vector"),
        Probe("on features, no bias", {"name": "fc", "units": 5, "bias": False,
              "init": {"kernel": "glorot_uniform"}}, "features", "vector"),
        Probe("on a sequence (T, E)", {"name": "fc", "units": 6, "bias": True,
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}}, "sequence", "sequence"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class Dense:
    """y = x @ kernel + bias with kernel ``(in, out)``, on the last axis: a flat ``(features,)``
    input, or a sequence ``(T, features)`` where every position is transformed alike."""

    name: str = spec_field("str")
    units: int = spec_field("posint")
    bias: bool = spec_field("bool")
    init: dict[str, Init] = init_field("kernel", "bias")

    def out_shape(self, in_shape: Shape) -> Shape:
        if len(in_shape) not in (1, 2):
            raise ValueError(
                f"dense expects a flat (features,) or sequence (T, features) input, "
                f"got shape {in_shape}"
            )
        return (*in_shape[:-1], self.units)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        n_in = in_shape[-1]
        specs = [
            ParamSpec(
                f"{self.name}.kernel",
                (n_in, self.units),
                "IO",
                self.init["kernel"],
                fan_in=n_in,
                fan_out=self.units,
            )
        ]
        if self.bias:
            specs.append(ParamSpec(f"{self.name}.bias", (self.units,), "O", self.init["bias"]))
        return specs

    def flops(self, in_shape: Shape) -> int:
        rows = _numel(in_shape[:-1])  # 1 for a flat input, T for a sequence
        return rows * (2 * in_shape[-1] * self.units + (self.units if self.bias else 0))


@register(
    "batchnorm",
    probes=(
        Probe("inference statistics on an image", {"name": "bn", "eps": 1.0e-5,
              "momentum": 0.1, "init": {"gamma": _SCALE, "beta": _BIAS, "mean": _BIAS,
              "var": _SCALE}}),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class BatchNorm:
    """Inference-mode batch normalisation over axis 0 of the per-sample shape (channels):
    y = (x - mean) / sqrt(var + eps) * gamma + beta. ``momentum`` is PyTorch's convention
    (new = (1 - m) * old + m * batch), recorded for frameworks; inference never uses it."""

    name: str = spec_field("str")
    eps: float = spec_field("posfloat")
    momentum: float = spec_field("rate")
    init: dict[str, Init] = init_field("gamma", "beta", "mean", "var")

    def out_shape(self, in_shape: Shape) -> Shape:
        if len(in_shape) not in (1, 3):
            raise ValueError(f"batchnorm expects (C,) or (C, H, W) input, got shape {in_shape}")
        return in_shape

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        c = in_shape[0]
        return [
            ParamSpec(f"{self.name}.gamma", (c,), "C", self.init["gamma"]),
            ParamSpec(f"{self.name}.beta", (c,), "C", self.init["beta"]),
            ParamSpec(f"{self.name}.mean", (c,), "C", self.init["mean"], trainable=False),
            ParamSpec(f"{self.name}.var", (c,), "C", self.init["var"], trainable=False),
        ]

    def flops(self, in_shape: Shape) -> int:
        return 2 * _numel(in_shape)  # folded into one scale and one shift per element


@register(
    "global_avgpool",
    probes=(Probe("(C, H, W) -> (C,)", output="vector"),),
)  # fmt: skip
@dataclass(frozen=True)
class GlobalAvgPool:
    """(C, H, W) -> (C,): mean over the spatial axes."""

    def out_shape(self, in_shape: Shape) -> Shape:
        _need_rank("global_avgpool", in_shape, 3, "(C, H, W)")
        return (in_shape[0],)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        return _numel(in_shape)


@register(
    "embedding",
    probes=(
        Probe("ids -> rows, id 0 an ordinary row", {"name": "emb", "vocab": 40, "dim": 8,
              "init": {"table": _TABLE}}, "tokens", "sequence"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class Embedding:
    """Token ids (T,) -> vectors (T, dim) by table lookup; id 0 (padding) is an ordinary row."""

    name: str = spec_field("str")
    vocab: int = spec_field("posint")
    dim: int = spec_field("posint")
    init: dict[str, Init] = init_field("table")

    def out_shape(self, in_shape: Shape) -> Shape:
        _need_rank("embedding", in_shape, 1, "token-id (T,)")
        return (in_shape[0], self.dim)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return [
            ParamSpec(
                f"{self.name}.table",
                (self.vocab, self.dim),
                "VE",
                self.init["table"],
                fan_in=self.vocab,
                fan_out=self.dim,
            )
        ]

    def flops(self, in_shape: Shape) -> int:
        return 0  # a lookup


@register(
    "gru",
    probes=(
        Probe("z|r|h, reset after, last state", {"name": "gru", "units": 5,
              "gate_order": ["z", "r", "h"], "reset_after": True, "initial_state": "zeros",
              "output": "last", "init": {"kernel": "glorot_uniform",
              "recurrent_kernel": "orthogonal", "bias_input": _BIAS, "bias_recurrent": _BIAS}},
              "sequence", "vector"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class GRU:
    """GRU over (T, E), zero initial state, returning the last step's state (H,).

    Gate order ``z, r, h`` and ``reset_after=True`` (Keras/cuDNN convention; see
    ``rosetta/models/gru.yaml`` for the equations). The spec format admits no other convention, so a
    backend never has to guess."""

    name: str = spec_field("str")
    units: int = spec_field("posint")
    gate_order: tuple[str, str, str] = spec_field("zrh")
    reset_after: bool = spec_field("true")
    initial_state: str = spec_field("zeros")
    output: str = spec_field("last")
    init: dict[str, Init] = init_field("kernel", "recurrent_kernel", "bias_input", "bias_recurrent")

    def out_shape(self, in_shape: Shape) -> Shape:
        _need_rank("gru", in_shape, 2, "sequence (T, E)")
        return (self.units,)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        _, e = in_shape
        h = self.units
        return [
            ParamSpec(
                f"{self.name}.kernel",
                (e, 3 * h),
                "E,3H",
                self.init["kernel"],
                fan_in=e,
                fan_out=3 * h,
            ),
            ParamSpec(
                f"{self.name}.recurrent_kernel",
                (h, 3 * h),
                "H,3H",
                self.init["recurrent_kernel"],
                fan_in=h,
                fan_out=3 * h,
            ),
            ParamSpec(f"{self.name}.bias_input", (3 * h,), "3H", self.init["bias_input"]),
            ParamSpec(f"{self.name}.bias_recurrent", (3 * h,), "3H", self.init["bias_recurrent"]),
        ]

    def flops(self, in_shape: Shape) -> int:
        t, e = in_shape
        h = self.units
        matmuls = 2 * (e + h) * 3 * h + 2 * 3 * h  # x@W + h@U + both biases
        # z, r: add + sigmoid (2H each); n: r*hh, add, tanh (3H); h': 1-z, two products, add (4H)
        elementwise = 3 * h + 2 * h + 2 * h + 3 * h + 4 * h
        return t * (matmuls + elementwise)


@register(
    "lstm",
    probes=(
        Probe("i|f|g|o, one bias, last state", {"name": "lstm", "units": 5,
              "gate_order": ["i", "f", "g", "o"], "initial_state": "zeros", "output": "last",
              "init": {"kernel": "glorot_uniform", "recurrent_kernel": "orthogonal",
                       "bias": _BIAS}}, "sequence", "vector"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class LSTM:
    """LSTM over (T, E), zero initial state and cell, returning the last step's state (H,).

    Gate blocks ``i | f | g | o`` (PyTorch's and Keras' order; ONNX's is ``i, o, f, c``) in
    ``kernel`` (E, 4H) and ``recurrent_kernel`` (H, 4H), and **one** bias (4H,), Keras' form:
    PyTorch, ONNX, cuDNN and Paddle keep two biases that only ever act as their sum, and two
    trained biases take two optimiser updates where one takes one, so the spec names one (a
    two-bias backend holds its second at zero, untrained; an import sums them). One step::

        i, f, g, o = split(x W + h U + b)
        c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c')
    """

    name: str = spec_field("str")
    units: int = spec_field("posint")
    gate_order: tuple[str, str, str, str] = spec_field("ifgo")
    initial_state: str = spec_field("zeros")
    output: str = spec_field("last")
    init: dict[str, Init] = init_field("kernel", "recurrent_kernel", "bias")

    def out_shape(self, in_shape: Shape) -> Shape:
        _need_rank("lstm", in_shape, 2, "sequence (T, E)")
        return (self.units,)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        _, e = in_shape
        h = self.units
        return [
            ParamSpec(f"{self.name}.kernel", (e, 4 * h), "E,4H", self.init["kernel"],
                      fan_in=e, fan_out=4 * h),
            ParamSpec(f"{self.name}.recurrent_kernel", (h, 4 * h), "H,4H",
                      self.init["recurrent_kernel"], fan_in=h, fan_out=4 * h),
            ParamSpec(f"{self.name}.bias", (4 * h,), "4H", self.init["bias"]),
        ]  # fmt: skip

    def flops(self, in_shape: Shape) -> int:
        t, e = in_shape
        h = self.units
        matmuls = 2 * (e + h) * 4 * h + 4 * h  # x@W + h@U + the bias
        # four activations (4H); c': two products and an add (3H); h': tanh and a product (2H)
        return t * (matmuls + 4 * h + 3 * h + 2 * h)


@register("residual")
@dataclass(frozen=True)
class Residual:
    """y = body(x) + shortcut(x); an empty shortcut is the identity."""

    body: tuple[Node, ...]
    shortcut: tuple[Node, ...] = ()

    @property
    def branches(self) -> tuple[tuple[Node, ...], tuple[Node, ...]]:
        """The two graphs whose outputs are added (walkers open them, see ``graph.walk``)."""
        return (self.body, self.shortcut)

    def out_shape(self, in_shape: Shape) -> Shape:
        main = infer_shape(self.body, in_shape)
        side = infer_shape(self.shortcut, in_shape)
        if main != side:
            raise ValueError(
                f"residual branches disagree: body gives {main}, shortcut gives {side}"
                + ("" if self.shortcut else " (identity shortcut: add a projection)")
            )
        return main

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return collect_params(self.body, in_shape) + collect_params(self.shortcut, in_shape)

    def flops(self, in_shape: Shape) -> int:
        out = self.out_shape(in_shape)
        return count_flops(self.body, in_shape) + count_flops(self.shortcut, in_shape) + _numel(out)


def is_variadic(node: object) -> bool:
    """Whether ``node`` reads several inputs (``add``, ``concat``): its ``out_shape``,
    ``param_specs`` and ``flops`` then take the tuple of its input shapes."""
    return bool(getattr(node, "VARIADIC", False))


def _need_inputs(op: str, in_shapes: tuple[Shape, ...]) -> None:
    if len(in_shapes) < 2 or not all(isinstance(s, tuple) for s in in_shapes):
        raise ValueError(f"{op} reads two or more inputs (name them: inputs: [a, b])")


@register(
    "add",
    probes=(
        Probe("two convolutions of one image", {}, "image", "image", inputs=(
            ({"op": "conv2d", "name": "left", "out_channels": 4, "kernel": [3, 3],
              "stride": [1, 1], "padding": [1, 1, 1, 1], "bias": True,
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}},),
            ({"op": "conv2d", "name": "right", "out_channels": 4, "kernel": [1, 1],
              "stride": [1, 1], "padding": [0, 0, 0, 0], "bias": False,
              "init": {"kernel": "glorot_uniform"}},),
        )),
        Probe("three inputs: two dense layers and the features themselves", {}, "features",
              "vector", inputs=(
            ({"op": "dense", "name": "left", "units": 12, "bias": True,
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}},),
            ({"op": "dense", "name": "right", "units": 12, "bias": False,
              "init": {"kernel": "glorot_uniform"}}, {"op": "relu"}),
            (),
        )),
        Probe("attention beside the identity, a row of padding only (the mask in a graph)", {},
              "sequence", "sequence", inputs=(
            ({"op": "attention", "name": "attn", "heads": 2, "mask": "tokens",
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}},),
            (),
        )),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class Add:
    """The elementwise sum of two or more inputs of one shape (a ``residual`` block is a
    ``body``, a ``shortcut`` and an ``add``, written as sugar)."""

    VARIADIC = True

    def out_shape(self, in_shapes: tuple[Shape, ...]) -> Shape:
        _need_inputs("add", in_shapes)
        if len(set(in_shapes)) != 1:
            raise ValueError(f"add: its inputs' shapes differ: {', '.join(map(str, in_shapes))}")
        return in_shapes[0]

    def param_specs(self, in_shapes: tuple[Shape, ...]) -> list[ParamSpec]:
        return []

    def flops(self, in_shapes: tuple[Shape, ...]) -> int:
        return (len(in_shapes) - 1) * _numel(self.out_shape(in_shapes))


@register(
    "concat",
    probes=(
        Probe("channels of a convolution and of the image itself", {"axis": 0}, "image",
              "image", inputs=(
            ({"op": "conv2d", "name": "left", "out_channels": 2, "kernel": [3, 3],
              "stride": [1, 1], "padding": [1, 1, 1, 1], "bias": True,
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}},),
            (),
        )),
        Probe("along the width (axis 2: a spatial axis in either layout)", {"axis": 2},
              "image", "image", inputs=(
            (),
            ({"op": "conv2d", "name": "right", "out_channels": 3, "kernel": [1, 3],
              "stride": [1, 1], "padding": [0, 0, 0, 0], "bias": True,
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}},),
        )),
        Probe("features: a dense layer's and the input's", {"axis": 0}, "features", "vector",
              inputs=(
            ({"op": "dense", "name": "left", "units": 5, "bias": True,
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}},),
            (),
        )),
        Probe("a sequence's features (axis 1)", {"axis": 1}, "sequence", "sequence", inputs=(
            (), ({"op": "gelu", "form": "erf"},),
        )),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class Concat:
    """Two or more inputs joined along the per-sample canonical ``axis`` (0: an image's
    channels or a vector's features; 1, 2: its height, width; for a sequence ``(T, E)``, 0 is
    time and 1 the features). Channels-last backends map the axis to their layout."""

    VARIADIC = True
    axis: int = spec_field("nonnegint")

    def out_shape(self, in_shapes: tuple[Shape, ...]) -> Shape:
        _need_inputs("concat", in_shapes)
        rank = len(in_shapes[0])
        if self.axis >= rank:
            raise FieldValueError(
                "axis", f"concat: axis {self.axis} is outside its rank-{rank} inputs (no batch)"
            )
        rest = {s[: self.axis] + s[self.axis + 1 :] for s in in_shapes}
        if any(len(s) != rank for s in in_shapes) or len(rest) != 1:
            raise ValueError(
                f"concat along axis {self.axis}: its inputs differ elsewhere: "
                + ", ".join(map(str, in_shapes))
            )
        size = sum(s[self.axis] for s in in_shapes)
        first = in_shapes[0]
        return first[: self.axis] + (size,) + first[self.axis + 1 :]

    def param_specs(self, in_shapes: tuple[Shape, ...]) -> list[ParamSpec]:
        return []

    def flops(self, in_shapes: tuple[Shape, ...]) -> int:
        return 0  # a copy


@register(
    "mul",
    probes=(
        Probe("a gate: a convolution times the sigmoid of another (SiLU, GLU)", {}, "image",
              "image", inputs=(
            ({"op": "conv2d", "name": "left", "out_channels": 3, "kernel": [3, 3],
              "stride": [1, 1], "padding": [1, 1, 1, 1], "bias": True,
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}},),
            ({"op": "conv2d", "name": "right", "out_channels": 3, "kernel": [1, 1],
              "stride": [1, 1], "padding": [0, 0, 0, 0], "bias": True,
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}}, {"op": "sigmoid"}),
        )),
        Probe("three inputs: the features and two dense layers of them", {}, "features",
              "vector", inputs=(
            (),
            ({"op": "dense", "name": "left", "units": 12, "bias": True,
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}},),
            ({"op": "dense", "name": "right", "units": 12, "bias": True,
              "init": {"kernel": "glorot_uniform", "bias": _BIAS}},),
        )),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class Mul:
    """The elementwise product of two or more inputs of one shape (a gate: SiLU is
    ``x * sigmoid(x)``, a GLU ``a * sigmoid(b)``)."""

    VARIADIC = True

    def out_shape(self, in_shapes: tuple[Shape, ...]) -> Shape:
        _need_inputs("mul", in_shapes)
        if len(set(in_shapes)) != 1:
            raise ValueError(f"mul: its inputs' shapes differ: {', '.join(map(str, in_shapes))}")
        return in_shapes[0]

    def param_specs(self, in_shapes: tuple[Shape, ...]) -> list[ParamSpec]:
        return []

    def flops(self, in_shapes: tuple[Shape, ...]) -> int:
        return (len(in_shapes) - 1) * _numel(self.out_shape(in_shapes))


@dataclass(frozen=True)
class Graph:
    """A layers list whose items are wired by name (``id``, ``inputs``): node ``i`` reads the
    outputs of the nodes ``inputs[i]`` (``-1``: the list's own input) and the last node's
    output is the graph's. Nothing else may be left unread. The loader makes one only where a
    list names an ``id`` or ``inputs``; a plain chain stays a tuple of nodes, and a
    ``residual`` block stays sugar for a body, a shortcut and their ``add``."""

    nodes: tuple[Node, ...]
    inputs: tuple[tuple[int, ...], ...]  # per node: indices of the nodes it reads, -1 the input
    ids: tuple[str, ...] = ()  # per node: its YAML ``id`` ("" where none): names in source

    def node_shapes(self, in_shape: Shape) -> list[tuple[Any, Shape]]:
        """Per node, ``(what it reads, its output shape)``: a shape, or a variadic node's tuple
        of its inputs' shapes."""
        outs: list[Shape] = []
        res: list[tuple[Any, Shape]] = []
        for node, src in zip(self.nodes, self.inputs, strict=True):
            shapes = tuple(in_shape if k < 0 else outs[k] for k in src)
            arg = shapes if is_variadic(node) else shapes[0]
            out = node.out_shape(arg)
            outs.append(out)
            res.append((arg, out))
        return res

    def out_shape(self, in_shape: Shape) -> Shape:
        return self.node_shapes(in_shape)[-1][1]

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        shapes = self.node_shapes(in_shape)
        return [
            p for n, (arg, _) in zip(self.nodes, shapes, strict=True) for p in n.param_specs(arg)
        ]

    def flops(self, in_shape: Shape) -> int:
        shapes = self.node_shapes(in_shape)
        return sum(n.flops(arg) for n, (arg, _) in zip(self.nodes, shapes, strict=True))


# -- sequence ops of the Transformer encoder (rosetta/models/transformer.yaml) ------------------
# A ``mask: tokens`` field means: the positions where the model's input token id is 0 are
# padding. The mask is made once from the model's input and handed to every op that declares it
# (the loader checks the input is token ids of the same length); the value flowing through the
# graph stays one tensor.


def _need_sequence(op: str, name: str, in_shape: Shape) -> None:
    if len(in_shape) != 2:
        raise ValueError(f"{op} {name}: expects a sequence (T, E) input, got shape {in_shape}")


@register(
    "layer_norm",
    probes=(
        Probe("over the last axis", {"name": "ln", "eps": 1.0e-5,
              "init": {"gamma": _SCALE, "beta": _BIAS}}, "sequence", "sequence"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class LayerNorm:
    """Normalisation over the last axis of each position: ``y = (x - mean) / sqrt(var + eps) *
    gamma + beta`` with the biased variance (divided by E, not E - 1), ``eps`` inside the root."""

    name: str = spec_field("str")
    eps: float = spec_field("posfloat")
    init: dict[str, Init] = init_field("gamma", "beta")

    def out_shape(self, in_shape: Shape) -> Shape:
        if len(in_shape) not in (1, 2):
            raise ValueError(
                f"layer_norm {self.name}: expects (E,) or (T, E) input, got shape {in_shape}"
            )
        return in_shape

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        e = in_shape[-1]
        return [
            ParamSpec(f"{self.name}.gamma", (e,), "E", self.init["gamma"]),
            ParamSpec(f"{self.name}.beta", (e,), "E", self.init["beta"]),
        ]

    def flops(self, in_shape: Shape) -> int:
        # per element: mean (add), centre (sub), square + sum (2), scale by the inverse
        # deviation (mul), gamma and beta (2): 7; the per-row divisions and root are not counted
        return 7 * _numel(in_shape)


@register(
    "gelu",
    probes=(Probe("exact (erf)", {"form": "erf"}, "sequence", "sequence"),),
)  # fmt: skip
@dataclass(frozen=True)
class GELU:
    """Exact GELU, ``x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))`` (no tanh approximation)."""

    form: str = spec_field("erf", default="erf")

    def out_shape(self, in_shape: Shape) -> Shape:
        return in_shape

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        return 5 * _numel(in_shape)  # scale, erf (counted as one), add, two products


@register(
    "position_embedding",
    probes=(
        Probe("table as long as the sequence", {"name": "pos", "max_len": 8,
              "init": {"table": _TABLE}}, "sequence", "sequence"),
        Probe("table longer than the sequence", {"name": "pos", "max_len": 12,
              "init": {"table": _TABLE}}, "sequence", "sequence"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class PositionEmbedding:
    """Learned absolute positions: ``y[t] = x[t] + table[t]`` for (T, E) with T <= max_len."""

    name: str = spec_field("str")
    max_len: int = spec_field("posint")
    init: dict[str, Init] = init_field("table")

    def out_shape(self, in_shape: Shape) -> Shape:
        _need_sequence("position_embedding", self.name, in_shape)
        if in_shape[0] > self.max_len:
            raise FieldValueError(
                "max_len",
                f"position_embedding {self.name}: the sequence has {in_shape[0]} positions, "
                f"more than its table's max_len {self.max_len}",
            )
        return in_shape

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        e = in_shape[-1]
        return [
            ParamSpec(
                f"{self.name}.table",
                (self.max_len, e),
                "PE",
                self.init["table"],
                fan_in=self.max_len,
                fan_out=e,
            )
        ]

    def flops(self, in_shape: Shape) -> int:
        return _numel(in_shape)  # one add per element


#: the attention op's parameter roles, in order: four projections, kernels ``IO`` (E, E) with
#: the columns (query/key/value) or rows (output) in head-major blocks of E / heads. The key
#: projection has no bias: it adds ``q . b_k`` to every score of a query's row, which the softmax
#: cancels, so its gradient is exactly 0 and Adam would turn the rounding noise of that 0 into
#: steps of +-lr (measured: float32 vs float64 6.6e3x the gate's bound after 3 steps).
ATTENTION_ROLES = (
    "query_kernel", "query_bias", "key_kernel",
    "value_kernel", "value_bias", "output_kernel", "output_bias",
)  # fmt: skip


@register(
    "attention",
    probes=(
        Probe("2 heads, key padding mask, a row of padding only", {"name": "attn", "heads": 2,
              "mask": "tokens", "init": {"kernel": "glorot_uniform", "bias": _BIAS}},
              "sequence", "sequence"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class Attention:
    """Multi-head scaled dot-product self-attention over (T, E) with a key padding mask.

    ``q = x Wq + bq``, ``k = x Wk`` (no bias: see :data:`ATTENTION_ROLES`), ``v = x Wv + bv``,
    split into ``heads`` blocks of ``d = E / heads``
    columns; per head ``softmax(q k^T / sqrt(d))`` over the keys that are not padding (a masked
    key has weight exactly 0), times ``v``; heads concatenated in order, then ``@ Wo + bo``.
    A query whose every key is padding (a sequence of padding only) attends to nothing: its
    head outputs are 0, so its output is ``bo``. No dropout on the attention weights."""

    name: str = spec_field("str")
    heads: int = spec_field("posint")
    mask: str = spec_field("tokens")
    init: dict[str, Init] = init_field("kernel", "bias")

    def out_shape(self, in_shape: Shape) -> Shape:
        return _check_heads("attention", self.name, self.heads, in_shape)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return _attention_params(self.name, self.init, in_shape[1])

    def flops(self, in_shape: Shape) -> int:
        return _attention_flops(self.heads, *in_shape)


def _attention_params(name: str, init: dict[str, Init], e: int) -> list[ParamSpec]:
    """The four projections of an attention op over width ``e`` (:data:`ATTENTION_ROLES`)."""
    specs = []
    for role in ATTENTION_ROLES:
        if role.endswith("kernel"):
            specs.append(
                ParamSpec(f"{name}.{role}", (e, e), "IO", init["kernel"], fan_in=e, fan_out=e)
            )
        else:
            specs.append(ParamSpec(f"{name}.{role}", (e,), "O", init["bias"]))
    return specs


def _attention_flops(heads: int, t: int, e: int) -> int:
    """Forward FLOPs of self-attention over (t, e): every score is computed (a mask only sets
    some to -inf before the softmax), as the frameworks' kernels do."""
    projections = 4 * 2 * t * e * e + 3 * t * e  # q, k, v, output matmuls; 3 biases
    scores = 2 * t * t * e  # q k^T over all heads (heads * t * t * d multiply-adds)
    softmax = 4 * heads * t * t  # scale, subtract the max and exp, sum, divide
    weighted = 2 * t * t * e  # weights @ v
    return projections + scores + softmax + weighted


def _check_heads(op: str, name: str, heads: int, in_shape: Shape) -> Shape:
    _need_sequence(op, name, in_shape)
    if in_shape[1] % heads:
        raise FieldValueError(
            "heads",
            f"{op} {name}: {heads} heads do not divide the width {in_shape[1]} "
            "(choose heads dividing E)",
        )
    return in_shape


@register(
    "causal_attention",
    probes=(
        Probe("2 heads, each position attends to itself and the positions before it",
              {"name": "attn", "heads": 2, "init": {"kernel": "glorot_uniform", "bias": _BIAS}},
              "sequence", "sequence"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class CausalAttention:
    """Multi-head causal self-attention over (T, E): :class:`Attention`'s projections and
    parameters (the same roles and layouts, the key projection without bias), with query ``i``
    attending to the keys ``j <= i`` only (a decoder: position ``i`` never sees a later token).
    There is no padding mask: a decoder's sequences are windows of running text, and the first
    position attends to itself alone. No dropout on the attention weights.

    A decoder generating with a key/value cache computes the same function: the keys and values
    of the positions already seen are kept, and a new position's query reads them and its own."""

    name: str = spec_field("str")
    heads: int = spec_field("posint")
    init: dict[str, Init] = init_field("kernel", "bias")

    def out_shape(self, in_shape: Shape) -> Shape:
        return _check_heads("causal_attention", self.name, self.heads, in_shape)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return _attention_params(self.name, self.init, in_shape[1])

    def flops(self, in_shape: Shape) -> int:
        return _attention_flops(self.heads, *in_shape)


@register(
    "tied_dense",
    probes=(
        Probe("logits over the vocabulary from the embedding's own table",
              {"name": "lm_head", "tie": "probe_embedding", "units": 40}, "sequence",
              "sequence"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class TiedDense:
    """A dense layer without bias whose kernel is an embedding's table, shared (weight tying, as
    GPT-2's language-model head): ``y = x @ table^T`` over the last axis, (..., E) -> (..., V).

    The spec writes it ``{op: tied_dense, name: lm_head, tie: embedding, units: V}``: ``tie`` names
    an earlier ``embedding`` layer, whose table ``<tie>.table`` (V, E) is the only parameter;
    ``units`` restates V so the shapes read from the layer itself (the loader checks that it is
    the table's vocabulary and that the input width is the table's dim). The op owns no
    parameter: the gradient of ``<tie>.table`` is the sum of the embedding's and this op's."""

    name: str = spec_field("str")
    tie: str = spec_field("str")
    units: int = spec_field("posint")

    def out_shape(self, in_shape: Shape) -> Shape:
        return (*in_shape[:-1], self.units)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []  # the table is the embedding's

    def flops(self, in_shape: Shape) -> int:
        return 2 * _numel(in_shape) * self.units


@register(
    "masked_mean",
    probes=(
        Probe("mean over real tokens, a row of padding only", {"mask": "tokens"}, "sequence",
              "vector"),
    ),
)  # fmt: skip
@dataclass(frozen=True)
class MaskedMean:
    """(T, E) -> (E,): the mean over the positions that are not padding. A sequence of padding
    only has no position to average: its mean is 0 (never NaN), with zero gradient."""

    mask: str = spec_field("tokens")

    def out_shape(self, in_shape: Shape) -> Shape:
        _need_sequence("masked_mean", "(pooling)", in_shape)
        return (in_shape[1],)

    def param_specs(self, in_shape: Shape) -> list[ParamSpec]:
        return []

    def flops(self, in_shape: Shape) -> int:
        return _numel(in_shape) + in_shape[1]  # masked sum, one division per feature


Node = (
    Conv2D | MaxPool2D | ReLU | Dropout | Flatten | Dense | BatchNorm | GlobalAvgPool | Embedding
    | GRU | Residual | LayerNorm | GELU | PositionEmbedding | Attention | CausalAttention
    | TiedDense | MaskedMean | Add | Concat | Graph | Tanh | HardSwish | Clip | Mul | AvgPool2D
)  # fmt: skip
