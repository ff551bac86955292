"""YAML -> validated ``Workload``: every malformed field fails with one line naming file and field.

The YAML format (see ``rosetta/models/README.md``): top-level ``name``, ``description``, ``task``,
``dataset``, ``input``, ``layers``, optional ``blocks`` (reusable layer lists with ``$param``
placeholders, instantiated by ``{block, name, repeat, args, first}``), optional ``defaults``
(per-op fields filled in where an op leaves them out), ``loss``, ``optimizer``, ``profiles``,
``tolerances``.

Loading is bounded (:mod:`rosetta.spec.limits`): the file's size, YAML values, nesting and aliases,
values after alias expansion, ``repeat``, leaf layers, parameters and activation sizes are all
checked before the work they guard, so any file loads (or is refused) in well under a second.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import yaml

from rosetta.errors import SpecError
from rosetta.spec import ops
from rosetta.spec.fields import KINDS, OpSchema, op_schema
from rosetta.spec.graph import walk
from rosetta.spec.init import Init, make_init
from rosetta.spec.limits import DEFAULT_LIMITS, SpecLimits, TooLarge, expanded_size
from rosetta.spec.params import numel
from rosetta.spec.workload import (
    SGD,
    Adam,
    AdamW,
    DatasetRef,
    GenerateSpec,
    InputSpec,
    Loss,
    Profile,
    Tolerance,
    Tolerances,
    WeightsRef,
    Workload,
)

TOP_LEVEL = {
    "name", "title", "order", "description", "task", "dataset", "input", "layers", "blocks",
    "defaults",
}  # fmt: skip
TITLE_MAX = 120  # characters of a report title: one line of a table caption
DEFAULT_ORDER = 1000  # a spec without ``order`` comes after those that have one, by name
TOP_LEVEL |= {"loss", "optimizer", "profiles", "tolerances", "weights", "provenance"}
#: an imported model's weights file: a plain name beside the spec (never a path elsewhere)
WEIGHTS_FILE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\.npz$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: ``provenance:`` keys and their kinds (text is shown, never run): an imported model's origin
PROVENANCE = {
    "file": "str", "sha256": "str", "producer": "str", "producer_version": "str",
    "opset": "nonnegint", "checked_against": "str", "check_max_abs": "float",
    "check_max_rel": "float", "check_tolerance": "str", "importer": "str",
}  # fmt: skip
TASKS = ("train", "features")
PROFILES = ("ci", "smoke", "full")
DTYPES = ("float32", "float64")
#: tolerance sets keyed by a reduced-precision policy (optional): bf16 mixed precision (float32
#: master weights) and TF32 (float32 tensors whose matmul/conv inputs CUDA rounds to 10 bits)
PRECISION_TOLERANCES = ("bf16", "tf32")
DATASET_OPTIONS: dict[str, dict[str, type | tuple]] = {
    "cifar10": {"classes": int},
    "imdb": {
        "classes": int,
        "num_words": int,
        "maxlen": int,
        "start_id": int,
        "oov_id": int,
        "index_from": int,
        "padding": ("pre", "post"),
    },
    "random_images": {"seed": int, "count": int},
}
#: the options a data set may leave out: IMDB's ``windows`` reads the reviews as running text,
#: windows of that many ids labelled with the next id at every position (a language model's)
DATASET_OPTIONAL: dict[str, dict[str, type]] = {"imdb": {"windows": int}}
_PLACEHOLDER = re.compile(r"^\$(\w+)(?:\*(\d+))?$")
#: every name a spec gives (the workload, a layer, a block, a block instance): an identifier.
#: A layer of a block instance is named ``PREFIX.i.NAME`` from such names (the only dots).
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
_NAME = re.compile(NAME_PATTERN)
NAME_RULE = f"a name matching {NAME_PATTERN} (a letter or _, then letters, digits, _; <= 64)"
DESCRIPTION_MAX = 500  # characters of a spec's description: printable text on one line
DESCRIPTION_RULE = (
    f"one line of printable text of at most {DESCRIPTION_MAX} characters "
    "(no control or line-separator characters)"
)
SHOWN_MAX = 80  # characters of an offending value an error message shows (its repr, cut)


#: workloads parsed in this process, by (path, the file's bytes, limits): a run that writes 600
#: records reads the spec 600 times, and PyYAML's pure-Python parser takes ~0.1 s a file
_PARSED: dict[tuple[str, bytes, SpecLimits], Workload] = {}
_PARSED_MAX = 64


def load_workload(path: str | Path, limits: SpecLimits = DEFAULT_LIMITS) -> Workload:
    """Parse and validate one workload spec file; raises ``SpecError`` (one line) if malformed
    or if it exceeds ``limits``. The file is read each call; the same bytes parse once per
    process (a ``Workload`` is a frozen value, shared)."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(limits.max_bytes + 1)
    except FileNotFoundError:
        raise SpecError(f"{path}: spec file not found") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the spec file ({exc.strerror or exc})") from None
    if len(data) > limits.max_bytes:
        raise SpecError(
            f"{path}: spec file larger than {limits.max_bytes:,} bytes (limit max_bytes); "
            "a workload spec is a few kilobytes"
        )
    key = (str(path), data, limits)
    if key in _PARSED:
        return _PARSED[key]
    too_deep = _flow_nesting_over(data, limits.max_depth)
    if too_deep:
        raise SpecError(
            f"{path}: line {too_deep}: YAML nested deeper than {limits.max_depth} levels "
            "(limit max_depth)"
        )
    loader = None
    try:  # the reader refuses non-printable bytes and bad UTF-8 already in the constructor
        loader = _BoundedLoader(data, path, limits)
        raw = loader.get_single_data()
    except yaml.reader.ReaderError as exc:
        raise SpecError(
            f"{path}: not a text spec: byte {exc.position} is {_char(exc.character)} "
            f"({exc.reason}); a spec is printable UTF-8 YAML"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SpecError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    finally:
        if loader is not None:
            loader.dispose()
    parser = _Parser(path, limits)
    parser.check_size(raw)
    workload = parser.workload(raw)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[key] = workload
    return workload


def parse_workload(raw: dict, path: Path, limits: SpecLimits = DEFAULT_LIMITS) -> Workload:
    """A workload from the mapping a spec file holds (``raw``), with every check a file gets;
    ``path`` names it in errors and its stem must be the workload's name (the conformance probes,
    ``rosetta.spec.probes``, are made this way, without a file)."""
    parser = _Parser(path, limits)
    parser.check_size(raw)
    return parser.workload(raw)


def _char(c: object) -> str:
    """A character the YAML reader refused, as a code (never the raw byte: it may be an
    escape or a control character)."""
    return (
        f"0x{c:02x}"
        if isinstance(c, int)
        else f"0x{ord(c):02x}"
        if isinstance(c, str) and len(c) == 1
        else "?"
    )


def _flow_nesting_over(data: bytes, limit: int) -> int:
    """The line where ``[``/``{`` nesting first passes ``limit`` (0 if never), outside quotes
    and comments. PyYAML's scanner costs time quadratic in flow nesting before its composer
    sees the first level, so such a file is refused before it is parsed."""
    depth, line, quote, comment, prev = 0, 1, 0, False, 32
    for c in data:
        if c == 10:  # newline
            line, comment = line + 1, False
        elif comment:
            pass
        elif quote:
            quote = 0 if c == quote else quote
        elif c in (34, 39):  # " '
            quote = c
        elif c == 35 and prev in (32, 9, 10):  # '#' after whitespace starts a comment
            comment = True
        elif c in (91, 123):  # [ {
            depth += 1
            if depth > limit:
                return line
        elif c in (93, 125):  # ] }
            depth = max(depth - 1, 0)
        prev = c
    return 0


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing too many values or aliases, or too deep nesting, while it
    composes (so a large file stops early instead of being parsed whole)."""

    def __init__(self, data: bytes, path: Path, limits: SpecLimits):
        super().__init__(data)
        self.path, self.limits = path, limits
        self.aliases = self.depth = self.nodes = 0

    def compose_node(self, parent, index):  # noqa: ANN001, ANN201 (PyYAML's signature)
        line = self.peek_event().start_mark.line + 1
        self.nodes += 1
        if self.nodes > self.limits.max_nodes:
            raise SpecError(
                f"{self.path}: line {line}: more than {self.limits.max_nodes:,} YAML values "
                "(limit max_nodes); a workload spec has a few hundred"
            )
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > self.limits.max_aliases:
                raise SpecError(
                    f"{self.path}: line {line}: more than {self.limits.max_aliases:,} YAML "
                    "aliases (limit max_aliases); write the layers out or use `blocks`"
                )
        self.depth += 1
        if self.depth > self.limits.max_depth:
            raise SpecError(
                f"{self.path}: line {line}: YAML nested deeper than {self.limits.max_depth} "
                "levels (limit max_depth)"
            )
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _Parser:
    """Carries the file name so every error can name it."""

    def __init__(self, path: Path, limits: SpecLimits = DEFAULT_LIMITS):
        self.path = path
        self.limits = limits
        self.where: dict[int, str] = {}  # id(node) -> the YAML field it came from
        self.sizes: dict[int, int] = {}  # id(YAML value) -> its size, aliases expanded
        self.copied = 0  # YAML values copied by block instances and defaults so far
        self.leaves = 0  # leaf ops built so far
        self.from_file = False  # the spec names a weights file: its layers may omit ``init``

    def too_large(self, field: str, what: str, limit: str) -> SpecError:
        return SpecError(f"{self.path}: field '{field}': {what} (limit {limit})")

    def expansion_error(self, exc: TooLarge, field: str, cap: int, limit: str) -> SpecError:
        if exc.recursive:
            return SpecError(
                f"{self.path}: field '{field}': a recursive YAML alias (a value "
                "that contains itself)"
            )
        return self.too_large(
            field, f"more than {cap:,} YAML values once aliases are expanded", limit
        )

    def check_size(self, raw: Any) -> None:
        """Refuse a document whose top-level fields expand (aliases) past ``max_nodes``."""
        items = raw.items() if isinstance(raw, dict) else [("<top level>", raw)]
        budget = self.limits.max_nodes
        for key, value in items:
            try:
                budget -= expanded_size(value, budget, self.sizes)
            except TooLarge as exc:
                raise self.expansion_error(
                    exc, str(key), self.limits.max_nodes, "max_nodes"
                ) from None

    def charge(self, value: Any, field: str) -> None:
        """Count the YAML values about to be copied (a block repetition, an op's defaults)."""
        try:
            self.copied += expanded_size(value, self.limits.max_expanded, self.sizes)
        except TooLarge as exc:
            raise self.expansion_error(
                exc, field, self.limits.max_expanded, "max_expanded"
            ) from None
        if self.copied > self.limits.max_expanded:
            raise self.too_large(
                field,
                f"blocks and defaults expand to more than {self.limits.max_expanded:,} values",
                "max_expanded",
            )

    def fail(self, field: str, expected: str, got: Any = "<missing>") -> SpecError:
        got_s = got if isinstance(got, str) and got.startswith("<") else _shown(got)
        field = field if field.isprintable() else _shown(field)
        return SpecError(f"{self.path}: field '{field}': expected {expected}, got {got_s}")

    def name(self, value: Any, field: str) -> str:
        """A name the spec gives: a string matching :data:`NAME_PATTERN`."""
        if not (isinstance(value, str) and _NAME.fullmatch(value)):
            raise self.fail(field, NAME_RULE, value)
        return value

    def description(self, value: Any) -> str:
        """The spec's description: :data:`DESCRIPTION_RULE` (it is shown, never run)."""
        if not (isinstance(value, str) and len(value) <= DESCRIPTION_MAX and value.isprintable()):
            raise self.fail("description", DESCRIPTION_RULE, value)
        return value

    # -- scalars -----------------------------------------------------------------------------
    def mapping(self, value: Any, field: str, allowed: set[str] | None = None) -> dict:
        if not isinstance(value, dict):
            raise self.fail(field, "a mapping", value)
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    raise self.fail(
                        f"{field}.{key}",
                        f"no such field (valid: {', '.join(sorted(allowed))})",
                        "<unknown field>",
                    )
        return value

    def req(self, m: dict, key: str, field: str) -> Any:
        if key not in m:
            raise self.fail(f"{field}.{key}" if field else key, "a value", "<missing>")
        return m[key]

    def scalar(self, value: Any, kind: str, field: str) -> Any:
        """Check ``value`` against a field kind of :data:`rosetta.spec.fields.KINDS`."""
        rule = KINDS[kind]
        if rule.accepts(value):
            return rule.convert(value)
        raise self.fail(field, rule.expected, value)

    def init(self, value: Any, field: str) -> Init:
        if isinstance(value, str):
            value = {"dist": value}
        m = self.mapping(value, field)
        args = {k: v for k, v in m.items() if k != "dist"}
        try:
            return make_init(str(self.req(m, "dist", field)), **args)
        except ValueError as exc:
            raise self.fail(field, str(exc), value) from None

    # -- layers ------------------------------------------------------------------------------
    def layers(self, raw: Any, field: str, blocks: dict, defaults: dict, prefix: str) -> tuple:
        """A layers list: a chain (a tuple of nodes), or, where an item names an ``id`` or its
        ``inputs``, one :class:`ops.Graph` wired by those names (``input``: the list's own
        input; an item without ``inputs`` reads the item before it)."""
        if not isinstance(raw, list) or not raw:
            raise self.fail(field, "a non-empty list of layers", raw)
        out: list[ops.Node] = []
        wires: list[tuple[int, ...]] = []
        names: list[str] = []
        known: dict[str, int] = {}  # id -> index of its node in ``out``
        wired = any(isinstance(it, dict) and ("id" in it or "inputs" in it) for it in raw)
        for i, item in enumerate(raw):
            where = f"{field}[{i}]"
            item = self.mapping(item, where)
            if "block" in item:
                for node in self.block_instance(item, where, blocks, defaults, prefix):
                    wires.append((len(out) - 1,))
                    names.append("")
                    out.append(node)
                continue
            item = dict(item)
            ident, sources = item.pop("id", None), item.pop("inputs", None)
            node = self.op(item, where, blocks, defaults, prefix)
            wires.append(self.sources(sources, node, where, known, len(out)))
            if ident is not None:
                ident = self.name(ident, f"{where}.id")
                if ident in known or ident == "input":
                    raise self.fail(f"{where}.id", "an id unique in its list, not 'input'", ident)
                known[ident] = len(out)
            names.append(ident or "")
            self.where[id(node)] = where
            out.append(node)
            self.leaves += not isinstance(node, ops.Residual)
            if self.leaves > self.limits.max_layers:
                raise self.too_large(
                    where, f"more than {self.limits.max_layers:,} layers", "max_layers"
                )
        if not wired:
            return tuple(out)
        read = {k for src in wires for k in src}
        for k in range(len(out) - 1):
            if k not in read:
                label = f"{self.where.get(id(out[k]), field)}"
                raise self.fail(
                    label,
                    "a layer whose output is read (a later layer's inputs, or the next layer "
                    "by default); only the list's last layer is its output",
                    "<read by no layer>",
                )
        graph = ops.Graph(tuple(out), tuple(wires), tuple(names))
        self.where[id(graph)] = field
        return (graph,)

    def sources(
        self, raw: Any, node: object, field: str, known: dict[str, int], index: int
    ) -> tuple[int, ...]:
        """A layer's ``inputs`` as node indices (-1: the list's input); without ``inputs`` it
        reads the layer before it. A variadic op names two or more, any other op one."""
        many = ops.is_variadic(node)
        if raw is None:
            if many:
                raise self.fail(
                    f"{field}.inputs", f"the {node.OP} layer's inputs: a list of two or more ids"
                )
            return (index - 1,)
        if not isinstance(raw, list) or not raw or not all(isinstance(r, str) for r in raw):
            raise self.fail(f"{field}.inputs", "a list of ids of earlier layers", raw)
        if many and len(raw) < 2:
            raise self.fail(f"{field}.inputs", f"two or more inputs for {node.OP}", raw)
        if not many and len(raw) != 1:
            raise self.fail(f"{field}.inputs", f"one input for {getattr(node, 'OP', 'it')}", raw)
        for r in raw:
            if r != "input" and r not in known:
                valid = ", ".join(["input", *known])
                raise self.fail(
                    f"{field}.inputs", f"ids of earlier layers of this list ({valid})", r
                )
        return tuple(-1 if r == "input" else known[r] for r in raw)

    def op(self, item: dict, field: str, blocks: dict, defaults: dict, prefix: str) -> ops.Node:
        kind = self.req(item, "op", field)
        if kind == "residual":
            return self.residual(item, field, blocks, defaults, prefix)
        if kind not in ops.OPS:
            raise self.fail(f"{field}.op", f"one of {', '.join(sorted(ops.OPS))}", kind)
        if kind in defaults:
            self.charge(defaults[kind], f"defaults.{kind}")
            item = _merge(defaults[kind], item)
        schema = _schema(ops.OPS[kind])
        fields, init_names = schema.fields, schema.inits
        allowed = set(fields) | {"op"} | ({"init"} if init_names else set())
        self.mapping(item, field, allowed)
        values = {
            key: self.scalar(self.req(item, key, field), t, f"{field}.{key}")
            for key, t in fields.items()
            if key in item or key not in schema.optional
        }
        if "name" in values:
            values["name"] = prefix + self.name(values["name"], f"{field}.name")
        if init_names and self.from_file and "init" not in item:
            values["init"] = {n: make_init("file") for n in init_names}  # the weights file's
        elif init_names:
            inits = self.mapping(self.req(item, "init", field), f"{field}.init", set(init_names))
            needed = [n for n in init_names if not (n == "bias" and not values.get("bias", True))]
            values["init"] = {
                n: self.init(self.req(inits, n, f"{field}.init"), f"{field}.init.{n}")
                for n in needed
            }
        return ops.OPS[kind](**values)

    def residual(
        self, item: dict, field: str, blocks: dict, defaults: dict, prefix: str
    ) -> ops.Residual:
        self.mapping(item, field, {"op", "body", "shortcut"})
        body = self.layers(self.req(item, "body", field), f"{field}.body", blocks, defaults, prefix)
        shortcut: tuple = ()
        sc = item.get("shortcut")
        if sc is not None:
            sc = self.mapping(sc, f"{field}.shortcut", {"when", "layers"})
            when = self.scalar(sc.get("when", True), "bool", f"{field}.shortcut.when")
            if when:
                shortcut = self.layers(
                    self.req(sc, "layers", f"{field}.shortcut"),
                    f"{field}.shortcut.layers",
                    blocks,
                    defaults,
                    prefix,
                )
        return ops.Residual(body=body, shortcut=shortcut)

    def block_instance(
        self, item: dict, field: str, blocks: dict, defaults: dict, prefix: str
    ) -> list:
        self.mapping(item, field, {"block", "name", "repeat", "args", "first"})
        bname = self.req(item, "block", field)
        if bname not in blocks:
            raise self.fail(
                f"{field}.block",
                f"a block defined under 'blocks' ({', '.join(blocks) or 'none'})",
                bname,
            )
        block = blocks[bname]
        params = block.get("params", [])
        name = self.name(self.req(item, "name", field), f"{field}.name")
        repeat = self.scalar(item.get("repeat", 1), "posint", f"{field}.repeat")
        if repeat > self.limits.max_repeat:
            raise self.too_large(
                f"{field}.repeat",
                f"repeat {repeat:,} is more than {self.limits.max_repeat:,}",
                "max_repeat",
            )
        args = self.mapping(item.get("args", {}), f"{field}.args", set(params))
        first = self.mapping(item.get("first", {}), f"{field}.first", set(params))
        nodes: list = []
        for r in range(repeat):
            bound = {**args, **(first if r == 0 else {})}
            missing = [p for p in params if p not in bound]
            if missing:
                raise self.fail(
                    f"{field}.args.{missing[0]}", f"a value for block parameter '{missing[0]}'"
                )
            self.charge(block["layers"], f"{field}.repeat")
            layers = _substitute(copy.deepcopy(block["layers"]), bound, self, f"blocks.{bname}")
            nodes.extend(
                self.layers(
                    layers,
                    f"{field}(blocks.{bname}, repeat {r})",
                    blocks,
                    defaults,
                    f"{prefix}{name}.{r}.",
                )
            )
        return nodes

    # -- whole file --------------------------------------------------------------------------
    def workload(self, raw: Any) -> Workload:
        m = self.mapping(raw, "<top level>", TOP_LEVEL)
        name = self.name(self.req(m, "name", ""), "name")
        if name != self.path.stem:
            raise self.fail("name", f"the file's stem {self.path.stem!r}", name)
        task = self.req(m, "task", "")
        if task not in TASKS:
            raise self.fail("task", f"one of {TASKS}", task)
        dataset = self.dataset(self.req(m, "dataset", ""))
        inp = self.mapping(self.req(m, "input", ""), "input", {"shape", "dtype"})
        shape = self.req(inp, "shape", "input")
        if not (
            isinstance(shape, list) and shape and all(isinstance(d, int) and d > 0 for d in shape)
        ):
            raise self.fail("input.shape", "a list of positive integers", shape)
        dtype = self.req(inp, "dtype", "input")
        if dtype not in ("float32", "int32"):
            raise self.fail("input.dtype", "float32 or int32", dtype)
        blocks = self.mapping(m.get("blocks", {}), "blocks")
        for bname, block in blocks.items():
            self.name(bname, f"blocks.{bname}")
            self.mapping(block, f"blocks.{bname}", {"params", "layers"})
            self.req(block, "layers", f"blocks.{bname}")
        weights = self.weights(m.get("weights"))
        self.from_file = weights is not None
        defaults = self.mapping(m.get("defaults", {}), "defaults", set(ops.OPS) - {"residual"})
        graph = self.layers(self.req(m, "layers", ""), "layers", blocks, defaults, "")
        input_spec = InputSpec(tuple(shape), dtype)
        self.check_graph(graph, input_spec.shape)
        loss = optimizer = None
        if task == "train":
            loss_m = self.mapping(self.req(m, "loss", ""), "loss", {"op", "reduction"})
            if loss_m.get("op") != "softmax_cross_entropy" or loss_m.get("reduction") != "mean":
                raise self.fail("loss", "{op: softmax_cross_entropy, reduction: mean}", loss_m)
            loss = Loss()
            optimizer = self.optimizer(self.req(m, "optimizer", ""))
        title, order = self.title_order(m, name)
        workload = Workload(
            name=name,
            title=title,
            order=order,
            description=self.description(m.get("description", "")),
            task=task,
            dataset=dataset,
            input=input_spec,
            graph=graph,
            loss=loss,
            optimizer=optimizer,
            profiles=self.profiles(self.req(m, "profiles", ""), task),
            tolerances=self.tolerances(self.req(m, "tolerances", ""), task),
            source=self.path,
            weights=weights,
            provenance=self.provenance(m.get("provenance")),
        )
        self.check_consistency(workload)
        self.check_masks(workload)
        self.check_ties(workload)
        self.check_generation(workload)
        self.check_profile_shapes(workload)
        return workload

    def weights(self, raw: Any) -> WeightsRef | None:
        """``weights: {file: NAME.npz, sha256: HEX}``: an imported model's weights, a plain file
        name beside the spec (its layers may then leave ``init`` out)."""
        if raw is None:
            return None
        m = self.mapping(raw, "weights", {"file", "sha256"})
        name = self.req(m, "file", "weights")
        if not (isinstance(name, str) and WEIGHTS_FILE.fullmatch(name)):
            raise self.fail(
                "weights.file", "a plain .npz file name beside the spec (no folder)", name
            )
        digest = self.req(m, "sha256", "weights")
        if not (isinstance(digest, str) and SHA256.fullmatch(digest)):
            raise self.fail("weights.sha256", "64 lowercase hex digits", digest)
        return WeightsRef(self.path.parent / name, digest)

    def provenance(self, raw: Any) -> tuple[tuple[str, object], ...]:
        """``provenance:``: where an imported model came from, each value a short printable
        string or a number (shown in the report and the record, never run)."""
        if raw is None:
            return ()
        m = self.mapping(raw, "provenance", set(PROVENANCE))
        out = []
        for key, value in m.items():
            field = f"provenance.{key}"
            if PROVENANCE[key] == "float":
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise self.fail(field, "a number", value)
                value = float(value)
            elif PROVENANCE[key] == "str":
                if not (isinstance(value, str) and value.isprintable() and len(value) <= 200):
                    raise self.fail(field, "one printable line of at most 200 characters", value)
            else:
                value = self.scalar(value, PROVENANCE[key], field)
            out.append((key, value))
        return tuple(out)

    def title_order(self, m: dict, name: str) -> tuple[str, int]:
        """The report's title (one line, default: the name) and place (default: after the rest)."""
        title = self.scalar(m.get("title", name), "str", "title")
        if not title.isprintable() or len(title) > TITLE_MAX or not title.strip():
            raise self.fail("title", f"one non-blank line of at most {TITLE_MAX} characters", title)
        order = self.scalar(m.get("order", DEFAULT_ORDER), "nonnegint", "order")
        return title.strip(), order

    def check_profile_shapes(self, w: Workload) -> None:
        """Apply the activation bound at every profile's actual input shape (``image_size``
        changes a features workload's spatial size; the spec's own shape was checked above)."""
        for pname, prof in w.profiles.items():
            size = getattr(prof, "image_size", 0)
            if not size or len(w.input.shape) != 3 or size == w.input.shape[1]:
                continue
            shape = (w.input.shape[0], size, size)
            field = f"profiles.{pname}.image_size"
            params = self.params
            try:
                self.check_values(shape, field)
                self._check(w.graph, shape, "layers", set())
            except SpecError as exc:
                raise SpecError(f"{exc} (at {field} = {size})") from None
            finally:
                self.params = params

    def dataset(self, raw: Any) -> DatasetRef:
        m = self.mapping(raw, "dataset")
        dname = self.req(m, "name", "dataset")
        if dname not in DATASET_OPTIONS:
            raise self.fail("dataset.name", f"one of {', '.join(DATASET_OPTIONS)}", dname)
        kinds = DATASET_OPTIONS[dname]
        optional = DATASET_OPTIONAL.get(dname, {})
        self.mapping(m, "dataset", set(kinds) | set(optional) | {"name"})
        for key, kind in (*kinds.items(), *((k, v) for k, v in optional.items() if k in m)):
            value = self.req(m, key, "dataset")
            if isinstance(kind, tuple):
                if value not in kind:
                    raise self.fail(f"dataset.{key}", f"one of {kind}", value)
            else:  # a count must be positive (num_words 0 keeps no word); ids and seeds >= 0
                kind = "nonnegint" if key.endswith(("_id", "_from")) or key == "seed" else "posint"
                self.scalar(value, kind, f"dataset.{key}")
        return DatasetRef(dname, tuple(sorted((k, v) for k, v in m.items() if k != "name")))

    def optimizer(self, raw: Any) -> SGD | Adam | AdamW:
        m = self.mapping(raw, "optimizer")
        kind = self.req(m, "op", "optimizer")
        if kind == "sgd":
            self.mapping(m, "optimizer", {"op", "lr", "momentum", "nesterov"})
            return SGD(
                lr=self.scalar(self.req(m, "lr", "optimizer"), "posfloat", "optimizer.lr"),
                momentum=self.scalar(m.get("momentum", 0.0), "rate", "optimizer.momentum"),
                nesterov=self.scalar(m.get("nesterov", False), "bool", "optimizer.nesterov"),
            )
        if kind == "adam":
            self.mapping(m, "optimizer", {"op", "lr", "beta1", "beta2", "eps"})
            return Adam(
                **{
                    k: self.scalar(
                        self.req(m, k, "optimizer"),
                        "rate" if k.startswith("beta") else "posfloat",
                        f"optimizer.{k}",
                    )
                    for k in ("lr", "beta1", "beta2", "eps")
                }
            )
        if kind == "adamw":
            self.mapping(
                m, "optimizer", {"op", "lr", "beta1", "beta2", "eps", "weight_decay", "decay"}
            )
            values = {
                k: self.scalar(
                    self.req(m, k, "optimizer"),
                    "rate" if k.startswith("beta") or k == "weight_decay" else "posfloat",
                    f"optimizer.{k}",
                )
                for k in ("lr", "beta1", "beta2", "eps", "weight_decay")
            }
            decay = self.req(m, "decay", "optimizer")
            if not (
                isinstance(decay, list)
                and decay
                and all(isinstance(r, str) and _NAME.fullmatch(r) for r in decay)
            ):
                raise self.fail(
                    "optimizer.decay", "a non-empty list of parameter roles, e.g. [kernel]", decay
                )
            return AdamW(**values, decay=tuple(decay))
        raise self.fail("optimizer.op", "sgd, adam or adamw", kind)

    def profiles(self, raw: Any, task: str) -> dict[str, Profile]:
        m = self.mapping(raw, "profiles", set(PROFILES))
        keys = ("batch_size", "epochs", "train_samples", "test_samples")
        optional: tuple[str, ...] = ()
        if task == "train":
            optional = ("generate",)
        if task == "features":
            keys = ("batch_size", "batches", "warmup_batches")
            optional = ("image_size",)
        out = {}
        for pname in PROFILES:
            p = self.mapping(
                self.req(m, pname, "profiles"), f"profiles.{pname}", set(keys) | set(optional)
            )
            vals = {
                k: self.scalar(
                    self.req(p, k, f"profiles.{pname}"),
                    "nonnegint" if k == "warmup_batches" else "posint",
                    f"profiles.{pname}.{k}",
                )
                for k in keys
            }
            vals.update(
                {
                    k: self.scalar(p[k], "posint", f"profiles.{pname}.{k}")
                    for k in optional
                    if k in p and k != "generate"
                }
            )
            if "generate" in p:
                vals["generate"] = self.generate(p["generate"], f"profiles.{pname}.generate")
            prof = Profile(name=pname, **vals)
            if task == "train" and prof.train_samples < prof.batch_size:
                raise self.fail(
                    f"profiles.{pname}.train_samples",
                    f">= batch_size ({prof.batch_size})",
                    prof.train_samples,
                )
            out[pname] = prof
        return out

    def generate(self, raw: Any, field: str) -> GenerateSpec:
        """``generate: {prompt_len, new_tokens, batches: [..]}``, each a positive integer (a
        prompt plus its new tokens must fit the context: ``check_generation``)."""
        m = self.mapping(raw, field, {"prompt_len", "new_tokens", "batches"})
        prompt_len, new_tokens = (
            self.scalar(self.req(m, k, field), "posint", f"{field}.{k}")
            for k in ("prompt_len", "new_tokens")
        )
        batches = self.req(m, "batches", field)
        if not isinstance(batches, list) or not batches:
            raise self.fail(f"{field}.batches", "a list of batch sizes, e.g. [1, 8]", batches)
        sizes = tuple(self.scalar(b, "posint", f"{field}.batches") for b in batches)
        return GenerateSpec(prompt_len, new_tokens, sizes)

    def check_generation(self, w: Workload) -> None:
        """A profile's ``generate`` needs a decoder (causal attention, a label per position) and
        prompt_len + new_tokens within its context (the input length: its position table)."""
        for pname, prof in w.profiles.items():
            g = prof.generate
            if g is None:
                continue
            field = f"profiles.{pname}.generate"
            leaves = walk(w.graph, w.input.shape)
            causal = any(isinstance(n, ops.CausalAttention) for n, _, _ in leaves)
            if not causal or not w.dataset.get("windows"):
                raise self.fail(field, "no generate: only a decoder generates", "<this workload>")
            context = w.input.shape[0]
            if g.prompt_len + g.new_tokens > context:
                raise self.fail(
                    f"{field}.new_tokens",
                    f"prompt_len + new_tokens <= the context {context} (input.shape)",
                    f"{g.prompt_len} + {g.new_tokens}",
                )

    def tolerances(self, raw: Any, task: str) -> dict[str, Tolerances]:
        m = self.mapping(raw, "tolerances", set(DTYPES) | set(PRECISION_TOLERANCES))
        kinds = ("forward", "loss", "grads", "params") if task == "train" else ("forward",)
        out = {}
        for dtype in (*DTYPES, *PRECISION_TOLERANCES):
            if dtype in PRECISION_TOLERANCES and dtype not in m:
                continue  # optional: a cell of that precision is refused by the gate, not here
            if isinstance(m[dtype], str):  # another set by name (``tf32: bf16``), stated above
                if m[dtype] not in out:
                    raise self.fail(f"tolerances.{dtype}", f"one of {', '.join(out)} (a set "
                                    "stated before it) or a mapping", m[dtype])  # fmt: skip
                out[dtype] = out[m[dtype]]
                continue
            d = self.mapping(self.req(m, dtype, "tolerances"), f"tolerances.{dtype}", set(kinds))
            tols = {}
            for kind in kinds:
                field = f"tolerances.{dtype}.{kind}"
                t = self.mapping(
                    self.req(d, kind, f"tolerances.{dtype}"), field, {"rtol", "atol", "scale"}
                )
                scale = t.get("scale", "element")
                if scale not in ("element", "max", "norm"):
                    raise self.fail(f"{field}.scale", "element, max or norm", scale)
                tols[kind] = Tolerance(
                    rtol=self.scalar(self.req(t, "rtol", field), "posfloat", f"{field}.rtol"),
                    atol=self.scalar(self.req(t, "atol", field), "posfloat", f"{field}.atol"),
                    scale=scale,
                )
            out[dtype] = Tolerances(**tols)
        return out

    # -- cross-field checks ------------------------------------------------------------------
    def check_graph(self, graph: tuple, in_shape: tuple) -> None:
        """Shape inference with errors that name the offending layer; bounds the model's size."""
        self.params = 0
        self.check_values(in_shape, "input.shape")
        self._check(graph, in_shape, "layers", set())

    def check_values(self, shape: tuple, field: str) -> None:
        if numel(shape) > self.limits.max_values:
            raise self.too_large(
                field,
                f"shape {list(shape)} holds more than {self.limits.max_values:,} values per sample",
                "max_values",
            )

    def _check(self, nodes: tuple, shape: tuple, field: str, names: set[str]) -> tuple:
        for i, node in enumerate(nodes):
            shape = self._check_node(node, shape, self.where.get(id(node), f"{field}[{i}]"), names)
        return shape

    def _check_node(self, node: Any, shape: Any, where: str, names: set[str]) -> tuple:
        """One node's output shape, its errors naming where it is written (a wired graph's
        nodes each at their own item, with the shapes they read)."""
        if isinstance(node, ops.Graph):
            outs: list[tuple] = []
            for j, (inner, src) in enumerate(zip(node.nodes, node.inputs, strict=True)):
                shapes = tuple(shape if k < 0 else outs[k] for k in src)
                arg = shapes if ops.is_variadic(inner) else shapes[0]
                at = self.where.get(id(inner), f"{where}[{j}]")
                outs.append(self._check_node(inner, arg, at, names))
            return outs[-1]
        label = getattr(node, "name", type(node).__name__.lower())
        if isinstance(node, ops.Residual):  # check each branch where its layers are written
            self._check(node.body, shape, f"{where}.body", names)
            self._check(node.shortcut, shape, f"{where}.shortcut.layers", names)
        elif hasattr(node, "name"):
            if node.name in names:
                raise self.fail(f"{where}.name", "a name unique in the model", node.name)
            names.add(node.name)
        try:
            out = node.out_shape(shape)
        except ops.FieldValueError as exc:  # the op's own field is at fault: name it
            raise self.fail(
                f"{where}.{exc.field}", f"a value that fits layer {label!r}", f"<{exc}>"
            ) from None
        except ValueError as exc:
            raise self.fail(where, f"an input that fits layer {label!r}", f"<{exc}>") from None
        if not isinstance(node, ops.Residual):  # a residual's params are its layers'
            self.count_params(node, shape, where)
        self.check_values(out, where)
        return out

    def count_params(self, node: Any, shape: tuple, where: str) -> None:
        self.params += sum(numel(p.shape) for p in node.param_specs(shape))
        if self.params > self.limits.max_params:
            raise self.too_large(
                where,
                f"the model passes {self.limits.max_params:,} parameter values here",
                "max_params",
            )

    def check_ties(self, w: Workload) -> None:
        """A ``tied_dense`` layer's ``tie`` names an earlier ``embedding`` whose table (V, E) fits
        it: ``units`` is V and the layer's input width is E."""
        tables: dict[str, ops.Embedding] = {}
        for node, in_shape, _ in walk(w.graph, w.input.shape):
            if isinstance(node, ops.Embedding):
                tables[node.name] = node
            if not isinstance(node, ops.TiedDense):
                continue
            where = self.where.get(id(node), "layers")
            emb = tables.get(node.tie)
            if emb is None:
                raise self.fail(
                    f"{where}.tie",
                    f"the name of an embedding layer before {node.name} "
                    f"({', '.join(tables) or 'there is none'})",
                    node.tie,
                )
            if node.units != emb.vocab:
                raise self.fail(
                    f"{where}.units", f"{emb.vocab}, the vocab of the tied table {emb.name}",
                    node.units,
                )  # fmt: skip
            if in_shape[-1] != emb.dim:
                raise self.fail(
                    f"{where}.tie",
                    f"an embedding {emb.dim} wide, as {node.name}'s input (width {in_shape[-1]})",
                    f"{emb.name} (dim {emb.dim})",
                )

    def check_masks(self, w: Workload) -> None:
        """A ``mask: tokens`` op needs the model's input to be token ids (int32, ``(T,)``) and
        its own input to have the same T positions (the mask is made from those ids)."""
        for node, in_shape, _ in walk(w.graph, w.input.shape):
            if getattr(node, "mask", None) is None:
                continue
            where = f"{self.where.get(id(node), 'layers')}.mask"
            op = f"{node.OP} {getattr(node, 'name', '')}".rstrip()
            if w.input.dtype != "int32" or len(w.input.shape) != 1:
                raise self.fail(
                    where,
                    f"a mask on token ids ({op} reads the padding of an int32 (T,) input; "
                    "this model's input is not token ids: remove the mask)",
                    [list(w.input.shape), w.input.dtype],
                )
            if in_shape[0] != w.input.shape[0]:
                raise self.fail(
                    where,
                    f"an input with the model input's {w.input.shape[0]} positions ({op})",
                    f"<{in_shape[0]} positions>",
                )

    def check_consistency(self, w: Workload) -> None:
        out = w.output_shape
        classes = w.dataset.get("classes")
        windows = w.dataset.get("windows")  # a language model: a label per position
        logits = (windows, classes) if windows else (classes,)
        if w.task == "train" and out != logits:
            at = f" at each of the {windows} positions" if windows else ""
            what = f"{classes} classes{at}"
            raise self.fail("layers", f"logits of shape {logits} for {what}", f"<{out}>")
        if windows and classes != w.dataset.get("num_words"):
            raise self.fail(
                "dataset.classes",
                f"num_words ({w.dataset.get('num_words')}): a label is the next word's id",
                classes,
            )
        if w.dataset.name == "imdb":
            length, field = (windows, "dataset.windows") if windows else (
                w.dataset.get("maxlen"), "dataset.maxlen")  # fmt: skip
            if w.input.shape != (length,) or w.input.dtype != "int32":
                raise self.fail(
                    "input",
                    f"shape [{length}] int32 ({field})",
                    [list(w.input.shape), w.input.dtype],
                )
            emb = next(walk(w.graph, w.input.shape))[0]  # the first op (a graph's first node)
            if not isinstance(emb, ops.Embedding) or emb.vocab < int(w.dataset.get("num_words")):
                raise self.fail(
                    "layers[0]",
                    f"an embedding with vocab >= dataset.num_words ({w.dataset.get('num_words')})",
                    getattr(emb, "vocab", type(emb).__name__),
                )


def _shown(value: Any) -> str:
    """``repr(value)``, cut to :data:`SHOWN_MAX` characters: one line whatever the value holds."""
    text = repr(value)
    return text if len(text) <= SHOWN_MAX else text[: SHOWN_MAX - 3] + "..."


@functools.cache
def _schema(cls: type) -> OpSchema:
    return op_schema(cls)


def _merge(base: dict, over: dict) -> dict:
    """``over`` on top of ``base``; nested mappings merge key by key."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _substitute(value: Any, bound: dict, parser: _Parser, field: str) -> Any:
    """Replace ``$param`` and ``$param*k`` strings by the bound values, recursively."""
    if isinstance(value, dict):
        return {k: _substitute(v, bound, parser, field) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, bound, parser, field) for v in value]
    if isinstance(value, str) and value.startswith("$"):
        match = _PLACEHOLDER.match(value)
        if not match or match.group(1) not in bound:
            raise parser.fail(
                field, f"a placeholder naming a block parameter ({', '.join(bound)})", value
            )
        v = bound[match.group(1)]
        if match.group(2):
            if not isinstance(v, int) or isinstance(v, bool):
                raise parser.fail(field, f"an integer for {match.group(1)} (used as {value})", v)
            v = v * int(match.group(2))
        return v
    return value
