"""Text shared by every generated file: the spec line of an op, layout-conversion helpers, the
weight table, the ``--check`` protocol and the file header. All of it is NumPy-only source."""

from __future__ import annotations

import keyword
import re
import textwrap
from dataclasses import fields

from rosetta.backends.snippet import ALL, Weight, attr, q
from rosetta.spec.graph import walk
from rosetta.spec.ops import CausalAttention, PositionEmbedding
from rosetta.spec.workload import SGD, Adam, AdamW, Workload

#: the names a generated ``--check`` run writes into OUT.npz (read back by the conformance test)
CHECK_KEYS = ("forward", "loss", "grad:<name>", "params:<name>")


def spec_line(op: object) -> str:
    """The op as its YAML line in the spec (flow style, the fields a reader sets)."""
    parts = [f"op: {getattr(op, 'OP', type(op).__name__)}"]
    for f in fields(op):  # type: ignore[arg-type]
        if f.name in ("init", "body", "shortcut"):
            continue
        value = getattr(op, f.name)
        if isinstance(value, tuple):
            value = "[" + ", ".join(str(v) for v in value) + "]"
        elif isinstance(value, bool):
            value = str(value).lower()
        parts.append(f"{f.name}: {value}")
    return "{" + ", ".join(parts) + "}"


# -- layout conversions between the canonical .npz and a framework --------------------------
HELPERS: dict[str, str] = {
    "swap_rz": '''
def swap_rz(a, axis):
    """GRU gate blocks z | r | h (the spec) <-> r | z | n (PyTorch, Chainer, Paddle): swap the
    first two."""
    z, r, h = np.split(a, 3, axis=axis)
    return np.concatenate([r, z, h], axis=axis)
''',
    "oihw_to_hwio": '''
def oihw_to_hwio(a):
    """Conv kernel (out, in, kh, kw), the spec's, -> (kh, kw, in, out), channels-last."""
    return a.transpose(2, 3, 1, 0)
''',
    "hwio_to_oihw": '''
def hwio_to_oihw(a):
    """Conv kernel (kh, kw, in, out) -> (out, in, kh, kw), the spec's."""
    return a.transpose(3, 2, 0, 1)
''',
    "chw_rows_to_hwc": '''
def chw_rows_to_hwc(a, chw):
    """Dense kernel rows in the spec's C, H, W flatten order -> the H, W, C order of a flatten of
    channels-last activations (same rows, permuted)."""
    c, h, w = chw
    return a.reshape(c, h, w, -1).transpose(1, 2, 0, 3).reshape(c * h * w, -1)
''',
    "hwc_rows_to_chw": '''
def hwc_rows_to_chw(a, chw):
    """Dense kernel rows in H, W, C flatten order -> the spec's C, H, W order."""
    c, h, w = chw
    return a.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(c * h * w, -1)
''',
}


def helpers_source(names: list[str] | tuple[str, ...], table: dict[str, str]) -> str:
    """The source of the helpers ``names`` (deduplicated, in order) from ``table``."""
    return "".join("\n" + table[n] for n in dict.fromkeys(names))


def conversion(expr: str) -> str:
    """A conversion expression over ``a`` as the generated file writes it: ``same``, a helper's
    name when the expression is one call on ``a``, else a lambda."""
    if expr == "a":
        return "same"
    m = re.fullmatch(r"(\w+)\(a\)", expr)
    return m.group(1) if m else f"lambda a: {expr}"


def part(p: str) -> str:
    return "ALL" if p == ALL else p


def weight_rows(weights: tuple[Weight, ...], indent: str = "        ") -> str:
    """The rows of a generated ``weight_table``: one tuple per (part of a) canonical tensor."""
    out = []
    for w in weights:
        note = f"  # {comment_text(w.note)}" if w.note else ""
        out.append(
            f"{indent}({q(w.canonical)}, {part(w.canonical_part)}, {w.native}, "
            f"{part(w.native_part)}, {conversion(w.to_native)}, {conversion(w.to_canonical)}),"
            f"{note}"
        )
    return "\n".join(out)


def shapes_literal(workload: Workload) -> str:
    """``{canonical name: shape}`` of every parameter, as a Python literal."""
    items = "".join(f"    {q(p.name)}: {tuple(p.shape)!r},\n" for p in workload.param_specs)
    return "{\n" + items + "}"


def trainable_literal(workload: Workload) -> str:
    """The trainable canonical names in graph order, as a Python tuple literal."""
    names = [p.name for p in workload.param_specs if p.trainable]
    return "(\n" + "".join(f"    {q(n)},\n" for n in names) + ")"


# -- a language model's generation -----------------------------------------------------------
#: the prompt and new tokens of a decoder's ``--check`` (its batch's first positions): the
#: generated file writes ``generated`` (N, CHECK_NEW), its greedy tokens from the loaded weights
CHECK_PROMPT, CHECK_NEW = 8, 8


def is_language_model(workload: Workload) -> bool:
    """Whether ``workload`` generates: a language model, logits per position (T, V) out of a
    graph holding a causal attention (a probe's classifier over one is not)."""
    if len(workload.output_shape) != 2:
        return False
    return any(isinstance(op, CausalAttention) for op, _, _ in _ops(workload))


def generated_check(workload: Workload, call: str) -> str:
    """A language model's ``--check`` line writing ``generated`` (N, ``CHECK_NEW``), its greedy
    tokens from the loaded weights, after the batch's first ``CHECK_PROMPT`` ids; ``call`` is the
    file's own expression of them, ``{prompt}`` and ``{new}`` filled here. '' for any other
    workload."""
    if not is_language_model(workload):
        return ""
    return '\n    out["generated"] = ' + call.format(prompt=CHECK_PROMPT, new=CHECK_NEW)


def forward_extras(workload: Workload) -> str:
    """A generated ``forward``'s arguments beyond its input: ``cache`` (a decoder's keys and
    values, generating) and ``offset`` (the positions already seen: learned positions and a
    cache's writes start there), each only where the model has an op that reads it."""
    walked = _ops(workload)
    if any(isinstance(op, CausalAttention) for op, _, _ in walked):
        return ", cache=None, offset=0"  # a cache is written at the offset (JAX reads it)
    if any(isinstance(op, PositionEmbedding) for op, _, _ in walked):
        return ", offset=0"
    return ""


def _ops(workload: Workload) -> list:
    return list(walk(workload.graph, workload.input.shape))


def optimizer_comment(workload: Workload) -> str:
    """The spec's optimiser in words, for the comment above ``make_optimizer``."""
    o = workload.optimizer
    if isinstance(o, SGD):
        return (
            f"The spec's SGD: lr {o.lr}, momentum {o.momentum}, nesterov {o.nesterov} "
            "(buf = momentum * buf + g; w -= lr * buf)"
        )
    if isinstance(o, Adam):
        return (
            f"The spec's Adam (Kingma & Ba, Algorithm 1): lr {o.lr}, beta1 {o.beta1}, "
            f"beta2 {o.beta2}, eps {o.eps}; w -= lr * m_hat / (sqrt(v_hat) + eps)"
        )
    if isinstance(o, AdamW):
        return (
            f"The spec's AdamW: lr {o.lr}, beta1 {o.beta1}, beta2 {o.beta2}, eps {o.eps}, "
            f"weight_decay {o.weight_decay} on the roles {', '.join(o.decay)} only; "
            "w -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * w)"
        )
    return "No optimiser: a features workload"


def comment_text(text: str) -> str:
    """``text`` made safe for a ``#`` comment: every character that is not printable (line
    breaks, U+2028, control characters) becomes a space, so the comment ends where its line does."""
    return "".join(c if c.isprintable() else " " for c in str(text))


def safe_name(workload: Workload) -> str:
    """The workload's name as the generated file writes it outside string literals (its
    docstring, comments, class names): an identifier whatever the name holds."""
    return attr(workload.name)


def class_name(workload: Workload) -> str:
    """The model's class name, e.g. ``Cnn``, ``Resnet50`` (never a keyword such as ``None``)."""
    name = safe_name(workload).capitalize()
    return f"{name}Model" if keyword.iskeyword(name) else name


def description_lines(workload: Workload) -> str:
    """The spec's description as the comment lines under a generated file's docstring (spec
    text is data: it is never pasted into a docstring or a hand-built literal)."""
    text = comment_text(workload.description).strip()
    if not text:
        return ""
    return "".join(f"# {line}\n" for line in textwrap.wrap(text, 94))


def header(workload: Workload, framework: str, backend: str, needs: str, notes: str = "") -> str:
    """The module docstring of a generated file, then the spec's description as comments."""
    mode = "a training step" if workload.task == "train" else "the features step"
    inp = "token ids (N, T) int" if len(workload.input.shape) == 1 else "images (N, C, H, W)"
    name = safe_name(workload)
    return f'''"""{name} in {framework}: the model of its Rosetta spec (see DESCRIPTION).

Generated by `rosetta code {name} --backend {backend}` from the spec
rosetta/models/{name}.yaml; regenerate rather than edit. Needs {needs} only.
It holds the model, {mode}, the optimiser as the spec states it and a loader for the
canonical weights (.npz, the spec's names and layouts; see `weight_table`).{notes}

    python {name}_{backend}.py --weights W.npz                # load, run one batch
    python {name}_{backend}.py --weights W.npz --check IN.npz OUT.npz [--dtype float64]

--check reads x (canonical {inp}), y and k from IN.npz and writes to
OUT.npz, in canonical names and layouts: forward (evaluation mode), loss and grad:<name>
(dropout off), and params:<name> after k optimiser steps on that batch (dropout off).
"""
{description_lines(workload)}'''


CHECK_IO = '''
ALL = ()  # index of a whole array: a[ALL] is a


def same(a):
    return a


def read_check_input(path):
    """x, y (or None) and k from a --check input file."""
    with np.load(path) as f:
        return f["x"], (f["y"] if "y" in f.files else None), int(f["k"]) if "k" in f.files else 0


def assemble(pieces, shapes):
    """{name: [(part, array), ...]} -> {name: array}: a canonical tensor from its parts."""
    out = {}
    for name, parts in pieces.items():
        if len(parts) == 1 and parts[0][0] == ALL:
            out[name] = np.asarray(parts[0][1])
            continue
        full = np.zeros(shapes[name], dtype=parts[0][1].dtype)
        for where, value in parts:
            full[where] = value
        out[name] = full
    return out
'''


def main_source(workload: Workload, example_shape: str) -> str:
    """The command-line face shared by every generated file (``check`` and ``demo`` differ)."""
    return f"""

# the spec's description: text, quoted by repr, never code
DESCRIPTION = {q(workload.description)}


def main(argv=None):
    text = f"{{__doc__.splitlines()[0]}} {{DESCRIPTION}}"
    # argparse %-formats a description that holds "%(prog)": doubled, every % stays text
    parser = argparse.ArgumentParser(
        description=text.replace("%", "%%") if "%(prog)" in text else text
    )
    parser.add_argument("--weights", required=True, help="canonical weights (.npz)")
    parser.add_argument("--check", nargs=2, metavar=("IN", "OUT"), help="run the checks")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    args = parser.parse_args(argv)
    with np.load(args.weights) as f:
        weights = {{name: f[name] for name in f.files}}
    if args.check:
        x, y, k = read_check_input(args.check[0])
        np.savez(args.check[1], **check(weights, x, y, k, args.dtype))
        return
    x = np.random.default_rng(0).{example_shape}
    out = check(weights, x, None, 0, args.dtype)["forward"]
    print({q(f"{workload.name}: forward")}, x.shape, "->", out.shape)


if __name__ == "__main__":
    main()
"""


def example_input(workload: Workload, batch: int = 4) -> str:
    """An expression of ``np.random.default_rng(0).`` making a small batch of inputs."""
    shape = (batch, *workload.input.shape)
    if len(workload.input.shape) == 1:
        return f"integers(0, 100, size={shape!r}).astype(np.int32)"
    return f"random({shape!r}, dtype=np.float32)"
