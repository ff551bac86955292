"""``rosetta bench``: run the matrix of backends x workloads for a profile, then summarise it.

This module parses the options, hands them as typed to ``Plan.from_options`` (every check, once,
one line each, exit status 2: ``rosetta.runner.plan``), runs the plan (``rosetta.runner.launch``:
the run folder locked with its configuration pinned, each cell in its own process, the progress
live) and prints the summary table, the CSV and the HTML report. The exit status is 0 only when
every selected cell is ``ok`` and equivalent (cells skipped because their framework is not
installed aside), 1 when a cell did not succeed and 3 when one is not equivalent, so CI can tell
a broken run from a good one (2: a refused option or an interrupted run).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rosetta.backends import options
from rosetta.errors import RosettaError
from rosetta.report.summary import summary, write_csv
from rosetta.runner import records
from rosetta.runner.plan import (
    MAX_CELLS,
    MAX_RAY_TIMEOUT_S,
    MAX_REPEAT,
    MAX_SAMPLE_EVERY,
    MAX_TIMEOUT_S,
    MAX_WAIT_QUIET_S,
    MIN_TIMEOUT_S,
    BenchOptions,
    Plan,
)
from rosetta.runner.signals import describe, interrupt_on_signals
from rosetta.runtime import PRECISIONS

# summary and the CSV live in rosetta.report
__all__ = ["add_parser", "dry_run_text", "run", "summary", "write_csv"]

#: (flags, default, help): every value option, parsed as text and checked by Plan.from_options
OPTIONS: tuple[tuple[tuple[str, ...], str | None, str], ...] = (
    (("--backends",), "all", "comma list of backends (default: every registered one)"),
    (("--workloads",), "all", "comma list of workloads (default: all)"),
    (("--profile",), "smoke", "ci (the training run, a few steps) | smoke (default, the training "
     "run + 5 timing rounds: 40 min for 11 backends x 4 workloads on a 2-core Zen 5, measured; "
     "--dry-run prints the estimate) | "
     "full (the original settings) | sweep (ci counts over batch 16,64 x threads 1,all x "
     "fp32,bf16)"),
    (("--run-id",), None, "name of a new run (default: time stamp + random suffix); an "
     "existing id resumes it"),
    (("--resume",), None, "resume an existing run by its id"),
    (("--results-dir",), None, "where run folders go (default: $ROSETTA_RESULTS_DIR, else "
     "./results)"),
    (("--report-dir",), None, "where the HTML report goes (default: $ROSETTA_REPORT_DIR, else "
     "./report)"),
    (("--data-dir",), None, "data folder (default $ROSETTA_DATA_DIR or <repo>/data), resolved "
     "once and handed to every cell"),
    (("--dtype",), "float32", "float32 (default) | float64"),
    (("--precisions", "--precision"), None, f"comma list of numeric policies: "
     f"{' | '.join(PRECISIONS)} (default: the profile's, fp32); one a backend or device cannot "
     "run is recorded as skipped"),
    (("--batch-sizes",), None, "comma list of batch sizes, e.g. 1,16,64 (default: the "
     "profile's); sample counts stay the profile's"),
    (("--repeat",), None, f"rounds: every cell this many times, each in a fresh process, in an "
     f"order shuffled per round from --seed; the first is the training run (all epochs, accuracy),"
     f" the others timing rounds (a few steps each: the intervals across processes) (default: "
     f"the profile's: ci 1, smoke 6, full 6, sweep 1; at most {MAX_REPEAT} rounds, {MAX_CELLS} "
     f"cells and an hour of timing rounds by estimate without --allow-large-run)"),
    (("--wait-quiet",), "0", f"seconds (0 to {MAX_WAIT_QUIET_S:g}) to wait for a busy machine "
     "to become quiet before the first cell (default 0: warn and go on)"),
    (("--device",), "auto", "auto (default: CUDA where the backend sees a GPU, resolved first "
     "in each cell's process) | cpu | cuda (refused up front where no GPU is visible)"),
    (("--seed",), "0", "weights, order, dropout (0 to 4294967295)"),
    (("--threads",), None, "comma list of CPU threads per cell, 1 to the usable cores ('all': "
     "every usable core), set in every framework and read back into the record (default: the "
     "profile's, all)"),
    (("--sample-every",), None, f"steady state: time every n-th training step with a sync, 1 to "
     f"{MAX_SAMPLE_EVERY} (default 1 on cpu, 4 on cuda; the other steps flow unsynced)"),
    (("--timeout",), "1800", f"seconds per cell before it is killed, {MIN_TIMEOUT_S:g} to "
     f"{MAX_TIMEOUT_S:g} (default 1800)"),
    (("--memory-limit-mb",), None, "cap each cell's address space (a cell past it fails "
     "instead of the machine), at least 64"),
    (("--lanes",), "fast", "comma list of fast (default: Rosetta's fast path) | default (each "
     "framework as it comes, its own plain defaults: eager PyTorch, TensorFlow without XLA, "
     "Keras' own train_on_batch, PyTensor's Numba linker; where a backend's package declares "
     "them in LANES); the report shows each lane's step time and cold start and their ratio"),
    (("--option",), None, "BACKEND.NAME=VALUE: a framework setting of one backend, repeatable "
     "(e.g. torch.compile=off, paddle.static=on, keras_jax.step=keras, pytensor.linker=numba; "
     "each backend declares its OPTIONS, checked up front; --torch-compile, --paddle-static, "
     "--keras-step and --pytensor-linker are spellings of these)"),
    (("--executor",), "papermill", "papermill (default: the backend's notebook, saved beside "
     "the record) | python | ray (each cell a task on a Ray cluster)"),
    (("--ray-address",), None, "--executor ray: the cluster (default: $RAY_ADDRESS, else a "
     "local Ray instance)"),
    (("--cells-per-node",), "1", "--executor ray: cells sharing a node at once (default 1: "
     "fair timing; more is flagged as noisy)"),
    (("--ray-cell-executor",), "papermill", "--executor ray: papermill (default) | python, how "
     "each node runs its cell"),
    (("--ray-timeout",), "30", f"--executor ray: seconds to reach the cluster before giving up, "
     f"1 to {MAX_RAY_TIMEOUT_S:g} (default 30)"),
)  # fmt: skip
FLAGS = (
    ("--retry-failed", "when resuming, also rerun failed, timed-out and killed cells"),
    ("--no-report", "skip the HTML report at the end"),
    ("--allow-large-run", f"lift the bounds of {MAX_REPEAT} rounds, {MAX_CELLS} cells and an "
     "hour of timing rounds"),
    ("--tf32", "allow TF32 for fp32 matmul/conv on CUDA (default off; refused on the CPU)"),
    ("--oversubscribe", "allow --threads above the usable cores (recorded in run.json)"),
    ("--dry-run", "check every option and print the plan (the cells of each round and the time "
     "estimate) without making data, creating folders or running anything"),
    ("--gate-every-point", "gate every cell (default: each function once per run; the other "
     "points reuse that verdict and their records name it)"),
)  # fmt: skip


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``rosetta bench``."""
    p = sub.add_parser(
        "bench",
        help="run backends x workloads, one process (papermill notebook) per cell",
        description="Run the benchmark matrix; exit status 0 only if every selected cell is ok.",
    )
    for flags, default, text in OPTIONS:
        if flags == ("--option",):
            p.add_argument(*flags, action="append", default=[], help=text)
            continue
        p.add_argument(*flags, default=default, help=text)
    for flag, (targets, name) in options.SPELLINGS.items():  # the older flags: spellings
        where = "/".join(targets) if isinstance(targets, tuple) else targets
        p.add_argument(f"--{flag.replace('_', '-')}", default=None,
                       help=f"a spelling of --option {where}.{name}=VALUE")  # fmt: skip
    for flag, text in FLAGS:
        p.add_argument(flag, action="store_true", help=text)
    p.set_defaults(func=run)


def _spelled(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with the older flags (``--torch-compile on``...) added to ``--option`` as the
    settings they spell (``torch.compile=on``)."""
    specs = list(args.option or [])
    for flag in options.SPELLINGS:
        value = getattr(args, flag, None)
        if value is not None:
            specs.extend(options.spelled(flag, value))
    return argparse.Namespace(**{**vars(args), "option": None, "options": tuple(specs)})


def run(args: argparse.Namespace) -> int:
    """Check the options into a plan, run it, summarise, report; exit 0 iff all ok.
    SIGTERM and SIGHUP are handled like Ctrl-C throughout."""
    from rosetta.runner.launch import launch

    with interrupt_on_signals():
        try:
            plan = Plan.from_options(BenchOptions.from_namespace(_spelled(args)))
            if plan.dry_run:
                print(dry_run_text(plan))
                return 0
            index = launch(plan)
        except KeyboardInterrupt as exc:
            raise RosettaError(
                f"interrupted ({describe(exc)}); the records written so far are kept "
                "(rosetta bench --resume <run-id> completes a run)"
            ) from None
    return _finish(plan, index)


def dry_run_text(plan: Plan) -> str:
    """What ``rosetta bench --dry-run`` prints: the start line, the estimate and every cell of
    every round (in declared order; a real run shuffles each round's order from the seed)."""
    from rosetta.runner.matrix import cell_label, round_cells

    lines = [f"dry run (nothing runs): {plan.banner(plan.results_dir / plan.run_id)}"]
    for r in range(plan.repeat):
        cells = [cell_label(c) for c in round_cells(plan, r)]
        kind = "training run" if r == 0 else "timing round"
        lines.append(f"round {r} ({kind}, {len(cells)} cells): {', '.join(cells)}")
    lines.append(f"data: {plan.template.data_dir} (not checked in a dry run)")
    return "\n".join(lines)


def _finish(plan: Plan, index: dict[str, dict]) -> int:
    """Print the summary, write the CSV and the report; the exit status."""
    run_dir = plan.results_dir / plan.run_id
    errors: list[str] = []
    recs = records.read_records(run_dir, errors)
    for line in [*errors, *records.data_changes(recs)]:
        print(f"warning: {line}")
    print(summary(recs, _run_info(run_dir)))
    print(f"summary CSV: {write_csv(recs, run_dir / 'summary.csv')}")
    if plan.report_dir is not None:
        _report(run_dir, plan.report_dir)
    bad = {k: v for k, v in index.items() if v["status"] not in ("ok", "skipped")}
    if bad:
        print(
            f"{len(bad)} of {len(index)} cells did not succeed: "
            + ", ".join(f"{k} {v['status']}" for k, v in bad.items())
        )
        return 1
    unequal = [k for k, v in index.items() if v["status"] == "ok" and v.get("equivalent") is False]
    if unequal:
        print(f"{len(unequal)} of {len(index)} cells are NOT EQUIVALENT: {', '.join(unequal)}")
        return 3
    if index and all(v["status"] == "skipped" for v in index.values()):
        print(f"nothing ran: all {len(index)} cells were skipped (their reasons above); exit "
              "status 0 says no cell failed, not that any was measured")  # fmt: skip
    return 0


def _run_info(run_dir: Path) -> dict:
    """The run's ``run.json`` (its measured ceilings) for the summary; {} if unreadable."""
    from rosetta.report.load import read_json

    return read_json(run_dir / "run.json")[0]


def _report(run_dir: Path, report_dir: Path) -> None:
    try:
        from rosetta.report import write_report
    except ImportError:
        print("HTML report: not available in this installation (pip install 'rosetta[report]')")
        return
    path = write_report([run_dir], report_dir / run_dir.name)
    print(noise_line(run_dir))
    print(f"HTML report: {path}")


def noise_line(run_dir: Path) -> str:
    """One line: the cells whose steady-state noise could change a verdict (the report's rule,
    ``rosetta.report.stats.noise_matters``), or that none could."""
    from rosetta.report import load_tables
    from rosetta.report.sections import noisy_groups

    try:
        noisy = sorted(noisy_groups(load_tables([run_dir])), key=str)
    except Exception as exc:  # a closing remark must not fail a run whose records are written
        return f"noise: not assessed ({type(exc).__name__}: {exc})"
    if not noisy:
        return "noise: no cell's step spread could change a verdict"
    names = [f"{w} {b} ({point}{f' on {m}' if m else ''})" for _, w, b, point, m in noisy]
    return f"noise that could change a verdict ({len(names)}): {', '.join(names)}"
