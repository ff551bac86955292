"""Field kinds of the spec: what a YAML value of each kind must look like.

An op declares its YAML fields on its own dataclass (``rosetta.spec.ops``): each field carries
its kind in its metadata (:func:`spec_field`), and an op with parameters lists the names of its
initialisers (:func:`init_field`). The loader reads that schema with :func:`op_schema`, so
adding an op is adding one dataclass; adding a kind is adding one line to :data:`KINDS`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(v: Any) -> bool:
    return (_int(v) or isinstance(v, float)) and not isinstance(v, bool)


def _ints(v: Any, n: int, low: int) -> bool:
    return isinstance(v, list) and len(v) == n and all(_int(x) and x >= low for x in v)


@dataclass(frozen=True)
class Kind:
    """One kind of field value: the test, the conversion, and the words of the error."""

    expected: str
    accepts: Callable[[Any], bool]
    convert: Callable[[Any], Any] = lambda v: v


#: kind name -> rule; the names appear in op field metadata and in the loader.
KINDS: dict[str, Kind] = {
    "str": Kind("a non-empty string", lambda v: isinstance(v, str) and bool(v)),
    "bool": Kind("true or false", lambda v: isinstance(v, bool)),
    "posint": Kind("a positive integer", lambda v: _int(v) and v > 0),
    "nonnegint": Kind("an integer >= 0", lambda v: _int(v) and v >= 0),
    "posfloat": Kind("a positive number", lambda v: _num(v) and v > 0, float),
    "float": Kind("a finite number", lambda v: _num(v) and abs(v) < float("inf"), float),
    "rate": Kind("a number in [0, 1)", lambda v: _num(v) and 0 <= v < 1, float),
    "pair": Kind("[h, w] of positive integers", lambda v: _ints(v, 2, 1), tuple),
    "quad": Kind("[top, bottom, left, right] of integers >= 0", lambda v: _ints(v, 4, 0), tuple),
    "CHW": Kind(
        "CHW (channel-major flatten, the only order the spec allows)", lambda v: v == "CHW"
    ),
    "zrh": Kind(
        "[z, r, h] (canonical gate order; backends reorder)", lambda v: v == ["z", "r", "h"], tuple
    ),
    "ifgo": Kind(
        "[i, f, g, o] (canonical gate order: PyTorch's and Keras'; backends reorder)",
        lambda v: v == ["i", "f", "g", "o"],
        tuple,
    ),
    "true": Kind(
        "true (reset gate after the recurrent matmul, cuDNN convention)", lambda v: v is True
    ),
    "zeros": Kind("'zeros' (the only supported value)", lambda v: v == "zeros"),
    "last": Kind("'last' (the only supported value)", lambda v: v == "last"),
    "tokens": Kind(
        "'tokens' (padding where the model's input token id is 0; the only supported mask)",
        lambda v: v == "tokens",
    ),
    "erf": Kind("'erf' (exact GELU, x * Phi(x); the only supported form)", lambda v: v == "erf"),
}


def spec_field(kind: str, optional: bool = False, **kwargs: Any) -> Any:
    """A dataclass field read from the YAML field of the same name, checked as ``kind``;
    ``optional``: the YAML may leave it out, and it takes its ``default``."""
    if kind not in KINDS:
        raise ValueError(f"unknown field kind {kind!r}")
    if optional and "default" not in kwargs:
        raise ValueError("an optional spec field needs a default")
    return dataclasses.field(metadata={"kind": kind, "optional": optional}, **kwargs)


def init_field(*names: str) -> Any:
    """The ``init`` field of an op with parameters: one initialiser per name in ``names``."""
    return dataclasses.field(metadata={"inits": names})


@dataclass(frozen=True)
class OpSchema:
    """The YAML schema of one op, derived from its dataclass."""

    fields: dict[str, str]  # field name -> kind name, in declaration order
    inits: tuple[str, ...]  # initialiser names ("" tuple: the op has no parameters)
    optional: frozenset[str] = frozenset()  # fields the YAML may leave out (their default)


def op_schema(cls: type) -> OpSchema:
    """Read the field kinds and initialiser names from an op dataclass's field metadata."""
    kinds: dict[str, str] = {}
    inits: tuple[str, ...] = ()
    optional: set[str] = set()
    for f in dataclasses.fields(cls):
        if "kind" in f.metadata:
            kinds[f.name] = f.metadata["kind"]
            if f.metadata.get("optional"):
                optional.add(f.name)
        elif "inits" in f.metadata:
            inits = tuple(f.metadata["inits"])
    return OpSchema(kinds, inits, frozenset(optional))
