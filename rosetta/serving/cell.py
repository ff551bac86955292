"""One serving cell in its own process: ``python -m rosetta.serving.cell REQUEST.json RECORD.json``.

The request names the backend, the workload, the scenario, the profile and the batching; the
cell builds the backend's model from the canonical weights (seed 0, float32), takes the
workload's test samples (the cell's data cut; random images for a features workload), computes
the float64 reference's outputs for them, runs :func:`rosetta.serving.run.serve`, and writes the
record: the request, the measurements, the load average before and after, and ``status`` ``ok``,
``skipped`` (a backend that cannot build the model, with the reason) or ``failed`` (the error in
one line). A record is always written; the process exits 0 when it is.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rosetta.serving import scenarios as sc
from rosetta.serving.sut import Batching

#: samples in the query-sample library per profile (LoadGen draws its queries from them)
#: (smoke: 128, as every accuracy run serves each once: 23 s of a 5.5 samples/s ResNet-50 backend)
SAMPLES = {"ci": 32, "smoke": 128, "full": 1024}


@dataclass(frozen=True)
class Request:
    """What one serving cell runs."""

    backend: str
    workload: str
    scenario: str
    profile: str = "ci"
    max_batch: int = 8
    max_wait_ms: float = 2.0
    p99_ms: float | None = None
    threads: int | None = None
    data_dir: str | None = None
    reference_cache: str | None = None  # an .npz the run's cells of this workload share

    def as_record(self) -> dict:
        return dict(self.__dict__)


def samples(workload, profile: str, data_dir: str | None) -> np.ndarray:
    """The query-sample library's inputs (canonical layout)."""
    from rosetta.runner.data import feature_images, load_cell_data

    n = SAMPLES.get(profile, SAMPLES["smoke"])
    if workload.task != "train":
        return feature_images(workload, 0, n)
    data = load_cell_data(workload, workload.profile(profile), data_dir)
    if data.x_test is None or len(data.x_test) == 0:
        raise ValueError(f"workload {workload.name}: no test samples in profile {profile}")
    x = data.x_test
    reps = -(-n // len(x))
    return np.concatenate([x] * reps)[:n] if reps > 1 else x[:n]


def reference(workload, params, x: np.ndarray, cache: Path | None = None) -> tuple:
    """The float64 reference's outputs for ``x`` (in chunks), and where they came from: the
    run's ``cache`` where it holds these very samples (a ResNet-50's float64 forward of 32
    images costs a minute, the same for every backend), else computed (and cached)."""
    from rosetta import backends

    if cache is not None and cache.is_file():
        with np.load(cache, allow_pickle=False) as f:
            if np.array_equal(f["x"], x):
                return np.array(f["ref"]), "the run's cache (the same samples)"
    ref = backends.make("numpy_ref", workload, params, dtype="float64")
    out = np.concatenate([ref.predict_numpy(x[i : i + 64]) for i in range(0, len(x), 64)])
    if cache is not None:
        tmp = cache.with_name(cache.name + ".partial.npz")
        np.savez(tmp, x=x, ref=out)
        tmp.replace(cache)
    return out, "computed"


def run_cell(req: Request) -> dict:
    """The record of one serving cell (module docstring)."""
    from rosetta import backends
    from rosetta.serving.run import serve
    from rosetta.spec import canonical_weights, get_workload

    record: dict = {"kind": "serving", "request": req.as_record(),
                    "load_before": list(os.getloadavg())}  # fmt: skip
    workload = get_workload(req.workload)
    params = canonical_weights(workload, 0)
    try:
        model = backends.make(req.backend, workload, params, dtype="float32",
                              threads=req.threads)  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - a backend that cannot build it: skipped, named
        record.update(status="skipped", reason=_line(exc))
        return record
    x = samples(workload, req.profile, req.data_dir)
    cache = Path(req.reference_cache) if req.reference_cache else None
    ref, record["reference_from"] = reference(workload, params, x, cache)
    batching = Batching(req.max_batch, req.max_wait_ms / 1e3)
    bound = None if req.p99_ms is None else req.p99_ms / 1e3
    measured = serve(model.predict_numpy, x, ref, workload.tolerances["float32"].forward,
                     req.scenario, sc.budget(req.profile), batching, bound)  # fmt: skip
    record.update(status="ok", samples=len(x), **measured)
    record["load_after"] = list(os.getloadavg())
    return record


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def main(argv: list[str]) -> int:
    request_path, record_path = Path(argv[0]), Path(argv[1])
    req = Request(**json.loads(request_path.read_text()))
    try:
        record = run_cell(req)
    except Exception as exc:  # noqa: BLE001 - the record says what failed, in one line
        record = {"kind": "serving", "request": req.as_record(), "status": "failed",
                  "error": _line(exc), "traceback": traceback.format_exc()[-2000:]}  # fmt: skip
    tmp = record_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, default=float))
    tmp.replace(record_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
