"""The measurements behind the transformer's fast paths: each backend's train step at the spec's
batch (64 x 150 token ids, the ``full`` profile's) in the forms its lowering can take.

``python -m benchmarks fastpath_transformer [--frameworks torch,tensorflow,jax]
[--only attention,xla,compile] [--rounds 10] [--warmup 2] [--batch N] [--threads N]``

Every comparison builds the lowered model twice through ``rosetta.backends.make`` with the build
option that switches the form (the backend's own switch, the one its lowering reads), from the
same canonical weights, and times their train steps interleaved (A B A B ..., after warm-up, in
one process: ``benchmarks.common.interleaved``). The figure is the median of the per-round
paired ratios A / B with a bootstrap 95% interval (< 1: A, the first form, is faster):

- ``attention`` (torch): ``F.scaled_dot_product_attention`` / composed ``matmul``+``softmax``
  (``attention="sdpa"`` / ``"composed"``), eager, as the runner trains;
- ``compile`` (torch): ``torch.compile`` (inductor) / eager (``compile=True`` / ``False``),
  SDPA both; the first step of each (where inductor compiles: minutes of C++ builds) is timed
  once and reported apart, as ``cold_first_step_s``;
- ``xla`` (tensorflow): ``jit_compile=True`` / ``False``, cold first steps reported apart;
- ``attention`` (jax): ``jax.nn.dot_product_attention`` / composed ``einsum``+``softmax``
  (``attention="jax.nn"`` / ``"composed"``), both under ``jax.jit``.

Each framework runs in a child process of its own (``--child``: TensorFlow, JAX and PyTorch
each start thread pools and an XLA client once per process; one framework's pools must not
share the cores with another's while it is timed). The batch has real padding (each row keeps
16..150 tokens, pre-padded as the IMDB data), so the key mask does work. Each model's manifest
lines (``attention``, ``attention_reason``, ``compile``, ``compile_reason``) go into the notes:
the JSON says which lowering each side ran. Run it alone on a quiet machine (the lead's
measurement); the defaults in the backends stand until it says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from benchmarks.common import Ratio, interleaved, median_interval, report, run_child

#: per framework and job: the two build-option sets compared (A first: the ratio is A / B)
JOBS: dict[str, dict[str, tuple[tuple[str, dict], tuple[str, dict]]]] = {
    "torch": {
        "attention": (("sdpa", {"attention": "sdpa"}), ("composed", {"attention": "composed"})),
        "compile": (("compiled", {"compile": True}), ("eager", {"compile": False})),
    },
    "tensorflow": {
        "xla": (("xla", {"jit_compile": True}), ("noxla", {"jit_compile": False})),
    },
    "jax": {
        "attention": (
            ("jax.nn", {"attention": "jax.nn"}),
            ("composed", {"attention": "composed"}),
        ),
    },
}
MANIFEST_LINES = ("attention", "attention_reason", "compile", "compile_reason")


def padded_batch(w, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows of token ids, each with 16..T real tokens at its end (pre-padding), labels."""
    rng = np.random.default_rng(seed)
    (t,) = w.input.shape
    x = np.zeros((n, t), dtype=np.int32)
    for i, length in enumerate(rng.integers(16, t + 1, size=n)):
        x[i, t - length :] = rng.integers(3, 30000, size=length)
    y = rng.integers(0, w.output_shape[0], size=n).astype(np.int64)
    return x, y


def child(framework: str, jobs: list[str], a: argparse.Namespace) -> dict:
    """Build and time each job's two forms of the transformer's train step in this process."""
    from rosetta.backends import make
    from rosetta.spec import canonical_weights, get_workload

    w = get_workload("transformer")
    params = canonical_weights(w)
    n = a.batch or w.profile("full").batch_size
    x, y = padded_batch(w, n)
    out: dict = {"framework": framework, "batch": n, "jobs": {}}
    for job in jobs:
        steps, cold, manifests = {}, {}, {}
        for label, options in JOBS[framework][job]:
            model = make(framework, w, params, threads=a.threads or None, **options)
            batch = next(iter(model.loader(x, y, np.arange(n), n)))

            def step(m=model, b=batch):
                return m.to_numpy(m.train_step(b))  # the loss read back: the step is done

            t0 = time.perf_counter()
            step()  # the cold first step: tracing and compilation land here
            cold[label] = round(time.perf_counter() - t0, 3)
            steps[label] = step
            man = model.manifest()
            manifests[label] = {k: man[k] for k in MANIFEST_LINES if k in man}
            print(f"  {framework} {job} {label}: cold first step {cold[label]:.1f} s", flush=True)
        times = interleaved(steps, rounds=a.rounds, warmup=a.warmup)
        out["jobs"][job] = {
            "times": times,
            "cold_first_step_s": cold,
            "manifests": manifests,
        }
    return out


def paired(name: str, a: list[float], b: list[float]) -> Ratio:
    """The median of the per-round ratios a_i / b_i with its bootstrap 95% interval."""
    ratios = np.asarray(a) / np.asarray(b)
    lo, hi = median_interval(ratios)
    return Ratio(
        name, float(np.median(ratios)), lo, hi, float(np.median(a)), float(np.median(b)), len(a)
    )


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks fastpath_transformer")
    p.add_argument("--frameworks", default="torch,tensorflow,jax")
    p.add_argument("--only", default="attention,xla,compile", help="jobs: attention,xla,compile")
    p.add_argument("--rounds", type=int, default=10, help="timed rounds per side (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds after the cold step")
    p.add_argument("--batch", type=int, default=0, help="0: the spec's (full profile) batch")
    p.add_argument("--threads", type=int, default=0, help="0: every usable core")
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    only = [j for j in a.only.split(",") if j]
    unknown = sorted(set(only) - {j for jobs in JOBS.values() for j in jobs})
    bad = sorted(set(a.frameworks.split(",")) - set(JOBS))
    if unknown or bad or a.rounds < 1 or a.warmup < 0:
        print(
            "fastpath_transformer: "
            + (f"unknown job {', '.join(unknown)}; " if unknown else "")
            + (f"unknown framework {', '.join(bad)}; " if bad else "")
            + f"jobs: attention, xla, compile; frameworks: {', '.join(JOBS)}; rounds >= 1"
        )
        return 2
    if a.child:
        jobs = [j for j in only if j in JOBS[a.child]]
        print(json.dumps(child(a.child, jobs, a)))
        return 0
    notes: dict = {"load_before": [round(v, 2) for v in os.getloadavg()], "frameworks": {}}
    rows: list[Ratio] = []
    for framework in a.frameworks.split(","):
        jobs = [j for j in only if j in JOBS[framework]]
        if not jobs:
            continue
        flags = ["--only", ",".join(jobs), "--rounds", str(a.rounds), "--warmup", str(a.warmup),
                 "--batch", str(a.batch), "--threads", str(a.threads)]  # fmt: skip
        res = run_child("fastpath_transformer", [framework, *flags])
        for job, got in res["jobs"].items():
            (first, _), (second, _) = JOBS[framework][job]
            t = got["times"]
            row = paired(f"transformer {framework} {first}/{second}", t[first], t[second])
            print(row.line(), flush=True)
            rows.append(row)
        notes["frameworks"][framework] = res
    notes["load_after"] = [round(v, 2) for v in os.getloadavg()]
    report("fastpath_transformer", rows, notes)
    return 0
