"""The ops of the spec in PyTensor: one module per op, found by its name (``rosetta.backends.driver
.discover``). Each holds ``build`` (the op as a function of symbolic tensors, ``layer(x, run)``,
its parameters ``shared`` variables of the build context; imports PyTensor itself), ``render``
(the same layer as a line of the generated file's symbolic ``forward``) and, for an op with
parameters, ``layout`` (its parameters' native layouts: the conversions from the canonical ones
and back, which ``weights.py`` collects). This package imports no framework.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from rosetta.backends.driver import Site
from rosetta.backends.snippet import Weight, q
from rosetta.spec.ops import Shape

#: op name -> why this backend does not lower it: the decoder's two ops (issue 45) came to every
#: other backend first; PyTensor's follow once its g++ builds of the decoder's graphs (forward and
#: gradients, float32 and float64) fit the slow test tier's time in CI
UNSUPPORTED: dict[str, str] = {
    "causal_attention": "not lowered yet: the decoder's ops (issue 45) came to the other "
    "backends first",
    "tied_dense": "not lowered yet: the decoder's ops (issue 45) came to the other backends first",
}

Convert = Callable[[np.ndarray], np.ndarray]
#: what an op's ``layout`` sees of the op walked just before it: ``(op, its per-sample input
#: shape)``, None for the first op (a dense layer's rows depend on a flatten before it)
Prev = tuple[object, Shape] | None


class Layout(NamedTuple):
    """One parameter's native layout: the conversion from the canonical layout, the conversion
    back, and its name (for the model's summary). Each is a permutation, so
    ``to_canonical(to_native(p)) == p`` bit for bit."""

    to_native: Convert
    to_canonical: Convert
    description: str


def param(name: str) -> str:
    """Parameter ``name`` as the generated file reads it: ``p["<name>"]``."""
    return f"p[{q(name)}]"


def weight(name: str, **kw: str) -> Weight:
    """The generated file's entry for parameter ``name`` (keyed by its canonical name)."""
    return Weight(name, repr(name), **kw)


def out_hw(site: Site) -> str:
    """The op's output height and width, ``(Ho, Wo)``, as the generated file passes them."""
    return f"({site.out_shape[1]}, {site.out_shape[2]})"
