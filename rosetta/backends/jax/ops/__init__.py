"""The ops of the spec in JAX: one module per op, found by its name (``rosetta.backends.driver
.discover``). Each holds ``build`` (the op as a pure function ``layer(params, x, run)`` of
``jax.lax`` primitives; imports jax itself), ``render`` (the same op as a line of the generated
file's ``forward(params, x)``, with the ``HELPERS`` that line calls) and, for an op whose
parameters JAX holds in another layout than the spec's, ``param_layout`` (its canonical <->
native conversions, which ``weights.ParamLayout`` gathers). An op module without
``param_layout`` keeps its parameters in the canonical layout. This package imports no
framework.
"""

from __future__ import annotations

from rosetta.backends.binding import Convert
from rosetta.backends.snippet import Weight, fmt_shape, nhwc, q

#: op name -> why this backend does not lower it (none: JAX lowers every op of the spec)
UNSUPPORTED: dict[str, str] = {}

#: one parameter's layout rule (``param_layout``'s values): canonical -> native, native ->
#: canonical, and the change in words for the summary (e.g. ``"OIHW->HWIO"``)
Rule = tuple[Convert, Convert, str]


def nhwc_shape(shape: tuple[int, ...]) -> str:
    """A per-sample canonical shape as the generated file holds it (images channels-last)."""
    return fmt_shape(nhwc(shape))


def param(name: str) -> str:
    """The generated file's expression for the parameter ``name``: ``p["conv1.kernel"]``."""
    return f"p[{q(name)}]"


def weight(name: str, **kw: str) -> Weight:
    """The parameter ``name`` as an entry of the generated file's flat dict (``kw``: its
    conversions and note)."""
    return Weight(name, repr(name), **kw)


def pads(padding: tuple[int, int, int, int]) -> str:
    """``(top, bottom, left, right)`` as ``lax``'s ``((top, bottom), (left, right))``."""
    t, b, left, right = padding
    return f"(({t}, {b}), ({left}, {right}))"
