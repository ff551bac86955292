"""Backends whose engine is a setting of the process run their conformance checks in a process
of their own.

Keras picks its engine once per process, at import (``rosetta/backends/keras_common/engine.py``),
and a pytest process runs many backends: ``tensorflow`` (Keras on TensorFlow) in-process, and
``keras_jax`` and ``keras_torch`` would each need the process's one Keras. So a backend whose
package names a ``KERAS_ENGINE`` is *delegated*: the first of its checks this process is asked
to run starts one child pytest over every check of that backend selected in this session
(``python -m pytest NODEIDS``, this file as its plugin, recording each outcome), and each
check then reports the child's outcome for it: passed, skipped with the child's reason, or
failed with the child's report. One child per backend and session (under ``--dist loadgroup``
all of a backend's checks share a worker: ``tests/conftest.py``), so its models are still built
once, in the only process whose Keras runs its engine; the tensorflow backend's checks and every
other test run in this process as before.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: set in the child: it runs the checks itself
CHILD_ENV = "ROSETTA_ENGINE_CHILD"
#: the child's JSON of outcomes (set by the parent)
REPORT_ENV = "ROSETTA_ENGINE_REPORT"
CHILD_TIMEOUT_S = 7200


def engine_of(item) -> tuple[str, str] | None:
    """``(backend, engine)`` where ``item`` checks a backend whose package names a
    ``KERAS_ENGINE`` (imported without its framework), else ``None``."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    name = params.get("backend")
    if not isinstance(name, str):
        return None
    engine = keras_engine(name)
    return (name, engine) if engine else None


def keras_engine(name: str) -> str | None:
    """The ``KERAS_ENGINE`` backend ``name``'s package names (imported without its framework),
    else ``None``: such a backend's checks run in its own child pytest."""
    from rosetta import backends

    try:
        package = importlib.import_module(backends.info(name).module_name)
    except Exception:  # noqa: BLE001 - an unknown or broken backend: its own checks say why
        return None
    return getattr(package, "KERAS_ENGINE", None)


def delegated(item) -> str | None:
    """The backend whose child runs ``item``, or ``None`` (run it here)."""
    if os.environ.get(CHILD_ENV):
        return None
    found = engine_of(item)
    return found[0] if found else None


_RESULTS: dict[str, dict[str, dict]] = {}


def plain_id(nodeid: str) -> str:
    """``nodeid`` without the ``@group`` suffix xdist's ``--dist loadgroup`` gives a grouped
    test on its worker (the child collects the file afresh: no worker, no suffix)."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") and at > nodeid.rfind("::") else nodeid


def outcome(item, backend: str) -> dict:
    """The child's outcome for ``item`` (the child runs once per backend and session)."""
    if backend not in _RESULTS:
        _RESULTS[backend] = _run_child(item.session, backend)
    got = _RESULTS[backend].get(plain_id(item.nodeid))
    if got is None:
        tail = _RESULTS[backend].get("", {}).get("text", "")
        return {"outcome": "failed", "text": f"not run in {backend}'s own process\n{tail}"}
    return got


def _run_child(session, backend: str) -> dict[str, dict]:
    nodeids = [
        plain_id(i.nodeid)
        for i in session.items
        if "conformance" in i.nodeid.split("::")[0] and (engine_of(i) or ("",))[0] == backend
    ]
    folder = Path(tempfile.mkdtemp(prefix=f"rosetta-{backend}-"))
    report = folder / "outcomes.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update({CHILD_ENV: backend, REPORT_ENV: str(report)})
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "", "-p", "no:cacheprovider"]
    cmd += ["-p", "tests.conformance.engine_process", *nodeids]
    try:
        done = subprocess.run(
            cmd,
            cwd=session.config.rootpath,
            env=env,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            check=False,
        )
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
    except subprocess.TimeoutExpired:
        tail = f"the child pytest ran past {CHILD_TIMEOUT_S} s"
    results = json.loads(report.read_text()) if report.is_file() else {}
    results[""] = {"outcome": "failed", "text": tail}
    return results


# -- the child's side: a plugin recording each check's outcome ---------------------------------
_OUTCOMES: dict[str, dict] = {}


def pytest_runtest_logreport(report) -> None:
    """Record each check's outcome (a failure in any phase wins, then a skip)."""
    if not os.environ.get(REPORT_ENV):
        return
    held = _OUTCOMES.setdefault(report.nodeid, {"outcome": "passed", "text": ""})
    if report.failed:
        held.update(outcome="failed", text=f"[{report.when}] {report.longreprtext}")
    elif report.skipped and held["outcome"] != "failed":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        held.update(outcome="skipped", text=reason.removeprefix("Skipped: "))


def pytest_sessionfinish(session) -> None:
    path = os.environ.get(REPORT_ENV)
    if path:
        Path(path).write_text(json.dumps(_OUTCOMES))
