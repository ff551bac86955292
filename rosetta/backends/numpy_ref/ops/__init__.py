"""The ops of the spec in the NumPy reference: one module per op, found by its name
(``rosetta.backends.driver.discover``). Each holds ``build`` (the reference layer of
``layers.py``, its forward with its backward beside it) and ``render`` (the same layer as a line
of the generated plain-NumPy file). Parameters keep their canonical layout: no weight mapping.
"""

from __future__ import annotations

from rosetta.backends.driver import Site
from rosetta.backends.snippet import Snippet, Weight, fmt_shape, q

#: op name -> why the reference does not compute it (none: the reference is the trusted answer,
#: so an op enters the spec with its reference kernel)
UNSUPPORTED: dict[str, str] = {}


def layer_line(call: str, site: Site, weights: tuple[Weight, ...] = ()) -> Snippet:
    """One layer of the generated file's ``sequential([...])``, with its output shape."""
    return Snippet(forward=(f"{call},  # {fmt_shape(site.out_shape)}",), weights=weights)


def owned(op: object, roles: tuple[str, ...]) -> tuple[Weight, ...]:
    """The op's parameters ``roles`` as entries of the generated file's ``params`` dict."""
    return tuple(Weight(f"{op.name}.{r}", f"params[{q(f'{op.name}.{r}')}]") for r in roles)
