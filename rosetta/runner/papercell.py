"""One cell as a papermill execution of its backend's notebook, in its own kernel.

``python -m rosetta.runner.papercell --config JSON`` executes ``notebooks/<backend>.ipynb``
(or the same notebook generated, in an installed package) with the config as papermill
parameters, saves the executed notebook beside the record, and turns what happened into exactly
one record:

- the notebook ran: its record (staged by the notebook's last cell) gains the executed
  notebook's name and papermill's own overhead (kernel start, cell execution machinery), which
  stays outside every clock;
- a cell of the notebook raised: ``failed`` with the exception's last line;
- the kernel died (segfault, out of memory, killed): ``killed``;
- the notebook finished without writing a record: ``failed``.

Every record carries the config and the environment manifest. The partial executed notebook is
kept whatever happens (papermill saves it after every cell).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rosetta.errors import RosettaError
from rosetta.runner import manifest, records
from rosetta.runner.config import CellConfig
from rosetta.runner.notebook import make_notebook, notebook_source, staged


def failure_record(
    config: CellConfig, status: str, error: str, *, environment: dict | None = None, **extra
) -> dict:
    """A non-ok record that still carries the config, the environment manifest and the data
    source the cell was to run on (``config.data_source``, verified by bench). ``environment``:
    a manifest already read (many records at once share one; reading it costs milliseconds)."""
    # the runtime died with the cell: no GPU facts claimed
    env = dict(environment) if environment is not None else manifest.environment("cpu")
    env["data_source"] = config.data_source or "unknown"
    return records.make_record(
        backend=config.backend,
        workload=config.workload,
        profile=config.profile,
        status=status,
        error=" ".join(error.split())[:500] or status,
        run_id=config.run_id,
        config=config.as_dict(),
        manifest=env,
        **extra,
    )


def execute(config: CellConfig) -> dict:
    """Run the cell's notebook with papermill and return the cell's record (not yet written)."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    out = Path(config.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    nb_out = out.with_suffix(".ipynb")
    inner = staged(config)
    Path(inner.out).unlink(missing_ok=True)
    source = notebook_source(config.backend)
    if source is None:  # an installed package: the same notebook, generated
        import nbformat

        source = out.with_name(f".{config.backend}.source.ipynb")
        nbformat.write(make_notebook(config.backend), str(source))
    load_before = manifest.load_snapshot()
    t0 = time.perf_counter()
    try:
        pm.execute_notebook(
            str(source),
            str(nb_out),
            parameters=inner.as_dict(),
            kernel_name="python3",
            progress_bar=False,
            log_output=False,
            cwd=str(out.parent),
        )
    except PapermillExecutionError as exc:
        last = f"{exc.ename}: {exc.evalue}".strip()
        return failure_record(config, "failed", last, notebook=nb_out.name, load_before=load_before)
    except Exception as exc:  # noqa: BLE001 - the kernel died or could not start
        name = type(exc).__name__
        status = "killed" if "Dead" in name or "died" in str(exc).lower() else "failed"
        why = "the notebook's kernel died (crash, out of memory or a signal)"
        reason = why if status == "killed" else f"{name}: {exc}"
        return failure_record(config, status, reason, notebook=nb_out.name, load_before=load_before)
    papermill_s = time.perf_counter() - t0
    staged_path = Path(inner.out)
    if not staged_path.exists():
        return failure_record(
            config,
            "failed",
            "the notebook finished without writing its record",
            notebook=nb_out.name,
        )
    rec = json.loads(staged_path.read_text())
    staged_path.unlink()
    rec["config"] = config.as_dict()
    rec["notebook"] = nb_out.name
    rec["executor"] = "papermill"
    rec["papermill_s"] = papermill_s
    rec["papermill_overhead_s"] = max(0.0, papermill_s - rec.get("wall_s", 0.0))
    return rec


def main(argv: list[str] | None = None) -> int:
    """Execute one cell's notebook and write its record (exactly one, whatever happens)."""
    p = argparse.ArgumentParser(prog="python -m rosetta.runner.papercell")
    p.add_argument("--config", required=True, help="a CellConfig as JSON")
    args = p.parse_args(argv)
    try:
        config = CellConfig.from_json(args.config)
    except RosettaError as exc:
        print(f"rosetta: error: {exc}", file=sys.stderr)
        return 2
    rec = execute(config)
    records.write_record(Path(config.out), rec)
    if rec["status"] != "ok":
        print(f"rosetta: error: {rec['error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
