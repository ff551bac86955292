"""Frameworks of the older comparisons that cannot run here, and why: data, not prose in code.

The comparison Rosetta descends from ran 13 frameworks. Those that have no backend here are
listed by ``rosetta list`` and in the README from this one table, each with the reason and how
the reason was checked (the command, run against the package registries this project installs
from, and what it answered), so that a row says what was found, not what was assumed. Rerun a
row's ``check`` to see whether it still holds; a framework that becomes installable moves to
``REGISTRY`` as a backend folder and leaves this table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AbsentFramework:
    """A framework of the older comparisons with no backend here."""

    name: str  # e.g. "cntk"
    framework: str  # the human name
    reason: str  # why it cannot run here, in one line
    check: str  # the command that checked it, and what it answered
    checked: str  # when (UTC date)


#: the rows, in the order ``rosetta list`` and the README show them
ABSENT: tuple[AbsentFramework, ...] = (
    AbsentFramework(
        "cntk",
        "Microsoft CNTK",
        "no wheel for Python 3.11 on the package index (its last release, 2.7, is from 2019)",
        "pip index versions cntk -> No matching distribution found for cntk (none for this "
        "Python); pip install --dry-run --no-deps cntk -> from versions: none",
        "2026-11-25",
    ),
    AbsentFramework(
        "caffe2",
        "Caffe2",
        "merged into PyTorch in 2018 and since removed from it: no package of its own, and the "
        "torch 2.13 installed here has no caffe2 module",
        "pip index versions caffe2 -> No matching distribution found; "
        "importlib.util.find_spec('caffe2') -> None beside torch 2.13.0+cpu",
        "2026-11-25",
    ),
    AbsentFramework(
        "knet",
        "Knet (Julia)",
        "a Julia package: no Julia in the registries this project installs from (no apt "
        "candidate, no PyPI package; PyPI's 'julia' is PyJulia, a bridge that needs Julia)",
        "apt-cache policy julia -> Candidate: (none); pip index versions knet -> No matching "
        "distribution found; which julia -> nothing",
        "2026-11-25",
    ),
    AbsentFramework(
        "mxnet",
        "Apache MXNet / Gluon",
        "retired (Apache Attic, 2023); its last wheel, 1.9.1, requires numpy<2, and every "
        "framework here is pinned to numpy 2.4.6",
        "pip install --dry-run -c constraints/cpu.txt mxnet==1.9.1 -> ResolutionImpossible: "
        "mxnet 1.9.1 depends on numpy<2.0.0, the constraint is numpy==2.4.6",
        "2026-11-25",
    ),
    AbsentFramework(
        "theano",
        "Theano",
        "retired (1.0.5, 2020); its maintained line is PyTensor, which runs here as backend "
        "'pytensor'",
        "pip index versions theano -> 1.0.5 the latest (2020); pytensor 3.0.7 is installed",
        "2026-11-25",
    ),
)
