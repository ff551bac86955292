"""The ops of the spec in MindSpore: one module per op, found by its name (``rosetta.backends.driver
.discover``). Each holds ``build`` (the ``mindspore.nn`` cell; imports MindSpore itself, through
``compat``), ``render`` (the same cell as source text) and, for an op with parameters,
``weights`` (its canonical tensors bound to the cell's, with the layout conversions). This package
imports no framework; below, the text helpers several ops share.
"""

from __future__ import annotations

#: op name -> why this backend does not lower it: the decoder's two ops (issue 45) came to every
#: other backend first; MindSpore's follow
UNSUPPORTED: dict[str, str] = {
    "causal_attention": "not lowered yet: the decoder's ops (issue 45) came to the other "
    "backends first",
    "tied_dense": "not lowered yet: the decoder's ops (issue 45) came to the other backends first",
}


def pair(p: tuple[int, int]) -> str:
    """A kernel or stride as MindSpore's source writes it: ``3`` for (3, 3), else ``(3, 2)``."""
    return str(p[0]) if p[0] == p[1] else f"({p[0]}, {p[1]})"


def pad_text(padding: tuple[int, int, int, int]) -> str:
    """The spec's ``(top, bottom, left, right)`` as ``nn.Conv2d``'s ``padding`` text."""
    t, b, left, right = padding
    if t == b == left == right:
        return str(t)
    return f"({t}, {b}, {left}, {right})"
