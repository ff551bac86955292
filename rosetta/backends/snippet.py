"""The values the source face of a backend's table deals in: a :class:`Snippet` per op, a
:class:`Weight` per tensor, and the :class:`RenderCtx` of one render.

A backend's ``source.py`` holds ``RENDER``, a :class:`rosetta.backends.driver.LoweringTable`
(the one table type) whose entries are ``entry(op, site, ctx) -> Snippet``: the lowering's own
signature, walked by the one driver (``driver.lower``), so ``source.py`` sits beside
``lowering.py`` and says in text what the lowering builds in objects. Everything here is text:
no framework import. ``rosetta.codegen`` (above the backends) composes the files.
"""

from __future__ import annotations

import hashlib
import keyword
from dataclasses import dataclass, field
from typing import Any

from rosetta.backends.driver import Site

ALL = "ALL"  # a Weight part that means "the whole array" (``a[()]`` in the generated file)


@dataclass(frozen=True)
class Weight:
    """One canonical tensor (or a slice of it) and the native tensor (or slice) holding it.

    ``native`` is an expression of the generated file (``model.conv1.weight``, a dict key...),
    ``to_native``/``to_canonical`` name conversion helpers of the generated file (``same``,
    ``transpose``, ``oihw_to_hwio``...), and the parts are index expressions (``ALL`` or e.g.
    ``np.s_[:, 100:200]``) for tensors that one side splits and the other keeps whole."""

    canonical: str  # e.g. "conv1.kernel"
    native: str  # e.g. "model.conv1.weight"
    to_native: str = "a"  # an expression over ``a``, the canonical array (or part)
    to_canonical: str = "a"  # an expression over ``a``, the native array (or part)
    canonical_part: str = ALL
    native_part: str = ALL
    note: str = ""  # the layout conversion in words ('' when the layouts agree)


@dataclass(frozen=True)
class Snippet:
    """What one op (or a composed sequence/residual) looks like in a framework's source.

    ``init`` are constructor lines (``self.conv1 = nn.Conv2d(...)``), ``forward`` the lines of
    the forward pass as templates over ``{x}`` (the variable they read and write); ``helpers``
    name functions the file must define (layout conversions, explicit padding); ``notes`` call
    out the layout conversions that happen at this op."""

    init: tuple[str, ...] = ()
    forward: tuple[str, ...] = ()
    weights: tuple[Weight, ...] = ()
    helpers: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """The op's source lines as a reader sees them (constructor lines, then forward)."""
        return [*self.init, *(f.replace("{x}", "x") for f in self.forward)]


def combine(snippets: list[Snippet], forward: tuple[str, ...]) -> Snippet:
    """The snippets' constructor lines, weights, helpers and notes, under ``forward``."""
    return Snippet(
        init=tuple(line for s in snippets for line in s.init),
        forward=forward,
        weights=tuple(w for s in snippets for w in s.weights),
        helpers=tuple(dict.fromkeys(h for s in snippets for h in s.helpers)),
        notes=tuple(n for s in snippets for n in s.notes),
    )


def statements(parts: list[Snippet]) -> Snippet:
    """A sequence in statement style: each part's forward lines in order, on one variable."""
    return combine(parts, tuple(line for p in parts for line in p.forward))


def add_branches(body: Snippet, shortcut: Snippet, site: Site, join: str) -> Snippet:
    """A residual block in statement style: keep the input as ``{s}``, run the body on ``{x}``
    and the shortcut on ``{s}``, then ``join`` (a template over ``{x}`` and ``{s}``). A nested
    block's kept input gets its own name (``shortcut1``...)."""
    s = "shortcut" if site.depth == 0 else f"shortcut{site.depth}"
    forward = (
        f"{s} = {{x}}  # the block's input, kept for the shortcut",
        *body.forward,
        *(line.replace("{x}", s) for line in shortcut.forward),
        join.replace("{s}", s),
    )
    return combine([body, shortcut], forward)


@dataclass
class RenderCtx:
    """State of one render, the text counterpart of a lowering's build context.

    ``pending_flatten`` holds the ``(C, H, W)`` of an NHWC flatten whose next dense layer must
    permute its rows; ``extra`` is a backend's own counters (JAX numbers its dropout keys);
    ``backend`` names the backend rendering (op modules shared by several backends, Keras',
    write one line differently on one of them)."""

    pending_flatten: tuple[int, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    backend: str = ""


#: attribute names a layer may not take in a generated model class: what ``torch.nn.Module``,
#: ``paddle.nn.Layer``, ``chainer.Chain`` and ``keras.layers.Layer`` already define (read with
#: ``dir()`` of each, torch 2.13, paddle 3, chainer 7.8, keras 3.15; a layer named ``forward``
#: or ``params`` replaced the method or broke link registration) and the generated classes' own
#: methods. Written out here: the render face imports no framework.
MODEL_ATTRIBUTES = frozenset(
    """T_destination activity_regularizer add_hook add_link add_loss add_metric add_module
    add_param add_parameter add_persistent add_sublayer add_variable add_weight addgrads apply
    astype autocast backward bfloat16 buffers build build_from_config built call
    call_signature_parameters call_super_init children clear_gradients cleargrads compile
    compute_dtype compute_mask compute_output_shape compute_output_spec copy copyparams
    count_params cpu create_parameter create_tensor create_variable cuda delete_hook device
    device_resident_accept disable_update double dtype dtype_policy dump_patches enable_update
    eval extra_repr float float16 forward from_chx from_config from_params full full_name
    get_buffer get_build_config get_config get_extra_state get_parameter get_sublayer
    get_submodule get_weights half init_scope input input_dtype input_spec ipu links load_dict
    load_own_variables load_state_dict local_link_hooks losses metrics metrics_variables modules
    mtia name named_buffers named_children named_modules named_parameters named_sublayers
    namedlinks namedparams non_trainable_variables non_trainable_weights output parameters
    params path printable_specs quantization_mode quantize quantized_build quantized_call
    register_backward_hook register_buffer register_forward_hook register_forward_post_hook
    register_forward_pre_hook register_full_backward_hook register_full_backward_pre_hook
    register_load_state_dict_post_hook register_load_state_dict_pre_hook register_module
    register_parameter register_persistent register_state_dict_hook
    register_state_dict_post_hook register_state_dict_pre_hook rematerialized_call repeat
    requires_grad_ save_own_variables serialize set_dict set_extra_state set_state_dict
    set_sublayer set_submodule set_weights setup share_memory sharded_state_dict state_dict
    stateless_call sublayers supports_jit supports_masking symbolic_call to to_chx to_cpu
    to_device to_empty to_gpu to_intel64 to_static_state_dict train trainable
    trainable_variables trainable_weights training type update_enabled variable_dtype variables
    weights within_init_scope xp xpu zero_grad zerograds""".split()
)


def attr(name: str) -> str:
    """A canonical op name as a Python identifier: ``layer1.0.conv1`` -> ``layer1_0_conv1``.

    Whatever ``name`` holds, the answer is an identifier that no generated file already uses
    (spec text never becomes code, and never replaces the file's own names): every character
    other than a letter, digit or ``_`` becomes ``_``, and a leading ``__`` (which a class body
    would mangle) one ``_``; where that changed more than the dots, or the result is a keyword or
    one of :data:`MODEL_ATTRIBUTES`, a digest of the name is appended (``forward`` ->
    ``forward_9dc08e40``), which keeps two such names apart."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in name)
    if not safe or safe[0].isdigit():
        safe = "_" + safe
    if safe.startswith("__"):  # in a class body Python would mangle it (``_Mlp__x``)
        safe = "_" + safe.lstrip("_")
    if (
        safe != name.replace(".", "_")
        or not safe.isidentifier()
        or keyword.iskeyword(safe)
        or keyword.issoftkeyword(safe)
        or safe in MODEL_ATTRIBUTES
    ):
        safe = f"{safe[:40]}_{hashlib.sha256(name.encode('utf-8', 'replace')).hexdigest()[:8]}"
    return safe


def q(text: str) -> str:
    """``text`` as a Python string literal, through the language's own quoting (``repr``),
    written with double quotes where that needs no escape (the house style of the files)."""
    r = repr(str(text))
    return f'"{r[1:-1]}"' if r[0] == "'" and '"' not in text else r


def fmt_shape(dims: tuple[int, ...], batch: str = "N") -> str:
    """``(N, 50, 32, 32)``: a batch of per-sample ``dims`` for shape comments."""
    return "(" + ", ".join([batch, *map(str, dims)]) + ")"


def batched_axis(
    axis: int, shape: tuple[int, ...], channels_last: bool, time_major: bool = False
) -> int:
    """The spec's per-sample ``axis`` of an input of canonical ``shape`` as an axis of the
    batched native array: ``axis + 1``, except an image's (C, H, W) in channels-last, whose C is
    the last axis (0 -> 3, 1 -> 1, 2 -> 2), and a sequence (T, E) held time-major, (T, N, E)
    (0 -> 0, 1 -> 2)."""
    if channels_last and len(shape) == 3:
        return (3, 1, 2)[axis]
    if time_major and len(shape) == 2:
        return (0, 2)[axis]
    return axis + 1


def nhwc(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A canonical ``(C, H, W)`` shape in channels-last order (other ranks unchanged)."""
    return (shape[1], shape[2], shape[0]) if len(shape) == 3 else shape


def wired_statements(parts: list[Snippet], wiring: Any, site: Site, ctx: Any = None) -> Snippet:
    """A wired graph in statement style: each layer's lines on a variable (named for its
    ``id``: ``h_<id>``, else ``h<j>``; a nested graph's names carry its path); a layer that is
    the only reader of its one input continues on that input's variable, as a chain does. A
    variadic layer's templates read ``{x0}``, ``{x1}``... for its inputs; the graph's input is
    ``{x}`` and its output is assigned back to ``{x}`` at the end. ``wiring`` is the driver's
    :class:`rosetta.backends.driver.Wiring`. The statement-style backends' ``graph`` render entry
    itself (``Entry("graph", wired_statements)``): ``ctx`` is not read."""
    nested = "_".join(p for p in site.path.split(".")[1:])
    prefix = f"h{nested}_" if nested else "h_"
    read = wiring.consumers()
    names: list[str] = []
    forward: list[str] = []
    for j, (part, src) in enumerate(zip(parts, wiring.inputs, strict=True)):
        ident = wiring.ids[j] if j < len(wiring.ids) else ""
        lines = list(part.forward)
        if len(src) == 1 and src[0] >= 0 and read[src[0]] == 1 and not ident:
            out = names[src[0]]  # its input's only reader: it continues on that variable
        else:
            out = f"{prefix}{attr(ident)}" if ident else f"{prefix}{j}"
            if len(src) == 1:  # a one-input layer's lines read and write one variable
                forward.append(f"{out} = " + ("{x}" if src[0] < 0 else names[src[0]]))
        names.append(out)
        lines = [line.replace("{x}", out) for line in lines]
        if len(src) > 1:  # a variadic op: its templates read {x0}, {x1}... (the input: {x})
            for i, k in enumerate(src):
                lines = [line.replace(f"{{x{i}}}", "{x}" if k < 0 else names[k]) for line in lines]
        forward.extend(lines)
    forward.append(f"{{x}} = {names[-1]}")
    return combine(parts, tuple(forward))
