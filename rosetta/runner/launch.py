"""Run a checked :class:`~rosetta.runner.plan.Plan`: lock its run folder with the configuration
pinned, record the machine's peaks once, show the start line and the live progress, check the
machine is quiet before the first cell, and run the matrix. ``rosetta bench`` prints the rest."""

from __future__ import annotations

from collections.abc import Callable

from rosetta import backends
from rosetta.errors import RosettaError
from rosetta.runner.matrix import cell_label, round_cells, run_matrix
from rosetta.runner.plan import Plan
from rosetta.runner.rundir import RunDir
from rosetta.runner.signals import describe


def _say(line: str) -> None:
    print(line, flush=True)


def launch(plan: Plan, say: Callable[[str], None] = _say) -> dict[str, dict]:
    """Run every cell of ``plan`` not yet recorded; returns ``{cell key: index entry}``. An
    interruption or a disk that refused a record is one ``RosettaError`` naming the resume."""
    from rosetta.runner.progress import make_display

    with RunDir(plan.results_dir, plan.run_id, plan.pinned(), create=not plan.resuming) as run:
        checked: list[bool] = []

        def quiet_once() -> None:  # before the first measurement of this invocation
            if not checked:
                checked.append(True)
                _quiet_check(run, plan.wait_quiet_s, say)

        say(plan.banner(run.path))
        if "peak_gflops" not in run.config:
            quiet_once()  # the peaks are measurements too: taken after the wait for quiet
            _record_peaks(run, plan, say)
        labels = [cell_label(c) for r in range(plan.repeat) for c in round_cells(plan, r)]
        display = make_display(labels)
        try:
            return run_matrix(plan, run, display, before_first=quiet_once)
        except KeyboardInterrupt as exc:
            raise RosettaError(
                f"interrupted ({describe(exc)}); the records written so far are kept in "
                f"{run.path}; resume with --resume {plan.run_id}"
            ) from None
        except RosettaError as exc:  # a disk that refused a record or the index
            raise RosettaError(
                f"{exc}; the records written so far are kept; resume with --resume {plan.run_id}"
            ) from None
        finally:
            getattr(display, "close", lambda: None)()


def _record_peaks(run: RunDir, plan: Plan, say: Callable[[str], None]) -> None:
    """The peaks this run's backends are measured against, in ``run.json``: the measured
    compute ceiling and memory bandwidth (``peaks.ceiling``) and each of their frameworks' own
    GEMM (fp32, bf16) and conv probes; a ceiling probe that ran on a busy machine says so."""
    from rosetta.runner.manifest import environment
    from rosetta.runner.peak import machine_peaks
    from rosetta.runner.probe import gemm_peak_gflops

    # each backend's own framework GEMM probe (its package's GEMM_PROBE; NumPy's for two)
    probes = {p[0] for b in plan.backends if (p := backends.constant(b, "GEMM_PROBE"))}
    peaks = machine_peaks(frameworks=tuple(sorted(probes)))
    run.add_to_run_file(peak_gflops=gemm_peak_gflops(), peaks=peaks, environment=environment())
    busy = (peaks.get("ceiling") or {}).get("warning")
    if busy:
        say(f"warning: {busy}")


def _quiet_check(run: RunDir, wait_s: float, say: Callable[[str], None]) -> None:
    """Read the machine before the first cell that runs; warn in one line and record the
    reading in run.json (``quiet_checks``: one per bench invocation that ran a cell)."""
    from rosetta.runner import quiet

    if wait_s > 0:
        say(f"checking the machine is quiet (waiting up to {wait_s:g} s)...")
    result = quiet.check_quiet(wait_s)
    if result["warning"]:
        say(f"warning: {result['warning']}")
    run.add_to_run_file(quiet_checks=[*run.config.get("quiet_checks", []), result])
