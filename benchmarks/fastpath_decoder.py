"""The measurements behind the decoder's fast paths: each generating backend's training step and
its greedy generation, in the attention forms its lowering can take.

``python -m benchmarks fastpath_decoder [--frameworks torch,jax] [--rounds 10] [--warmup 2]
[--prompt-len 32] [--new-tokens 32] [--batches 1,8] [--threads N]``

Each comparison builds the lowered decoder twice through ``rosetta.backends.make`` with the build
option its lowering reads (``attention``), from the same canonical weights, and times the two
interleaved in one process (``benchmarks.common.interleaved``): the training step (the spec's
batch of 16 windows of 128 tokens, AdamW) and one whole generation per batch size (the prefill,
then one token a step, each token on the host before the next step, as
``rosetta.runner.generation.time_generation`` runs it). The figure is the median of the per-round
paired ratios A / B with its bootstrap 95% interval (< 1: A, the first form, is faster):

- torch: ``F.scaled_dot_product_attention`` (``is_causal`` over the prompt, plain over the
  cache for a new token) / composed ``matmul`` + ``softmax`` under the causal mask;
- jax: ``jax.nn.dot_product_attention`` / composed ``einsum`` + ``softmax``, both jitted (one
  program for the prompt's length, one for a token, over the static cache).

Each framework runs in a child process of its own (its thread pools alone on the cores). Run it
alone on a quiet machine; the load before and after is in the JSON.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from benchmarks.common import Ratio, interleaved, report, run_child, streamed_generation
from benchmarks.fastpath_transformer import paired

#: per framework: the two attention forms compared (A first: the ratio is A / B)
FORMS: dict[str, tuple[str, str]] = {"torch": ("sdpa", "composed"), "jax": ("jax.nn", "composed")}


def child(framework: str, a: argparse.Namespace) -> dict:
    """Time both forms' training step and generations in this process."""
    from rosetta.backends import make
    from rosetta.spec import canonical_weights, get_workload
    from tests.conformance.conftest import gate_batch

    w = get_workload("decoder")
    params = canonical_weights(w)
    n = w.profile("smoke").batch_size
    x, y = gate_batch(w, n)
    batches = [int(b) for b in a.batches.split(",")]
    prompts = x[: max(batches), : a.prompt_len]
    models, jobs = {}, {}
    for form in FORMS[framework]:
        m = make(framework, w, params, threads=a.threads or None, attention=form)
        models[form] = m
        batch = next(iter(m.loader(x, y, np.arange(n), n)))
        jobs.setdefault("train", {})[form] = lambda m=m, b=batch: m.to_numpy(m.train_step(b))
        for b in batches:
            jobs.setdefault(f"generate b{b}", {})[form] = lambda m=m, p=prompts[:b]: (
                streamed_generation(m, p, a.new_tokens)
            )
    times = {job: interleaved(steps, rounds=a.rounds, warmup=a.warmup)
             for job, steps in jobs.items()}  # fmt: skip
    manifests = {f: {k: v for k, v in m.manifest().items() if k.startswith("attention")}
                 for f, m in models.items()}  # fmt: skip
    return {"framework": framework, "batch": n, "times": times, "manifests": manifests}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks fastpath_decoder")
    p.add_argument("--frameworks", default="torch,jax")
    p.add_argument("--rounds", type=int, default=10, help="timed rounds per side (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--batches", default="1,8")
    p.add_argument("--threads", type=int, default=0, help="0: every usable core")
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    bad = sorted(set(a.frameworks.split(",")) - set(FORMS))
    if bad or a.rounds < 1 or a.warmup < 0 or a.prompt_len < 1 or a.new_tokens < 1:
        print(f"fastpath_decoder: frameworks: {', '.join(FORMS)}; rounds, prompt and new >= 1")
        return 2
    if a.child:
        print(json.dumps(child(a.child, a)))
        return 0
    notes: dict = {"load_before": [round(v, 2) for v in os.getloadavg()], "frameworks": {}}
    rows: list[Ratio] = []
    for framework in a.frameworks.split(","):
        flags = ["--rounds", str(a.rounds), "--warmup", str(a.warmup), "--prompt-len",
                 str(a.prompt_len), "--new-tokens", str(a.new_tokens), "--batches", a.batches,
                 "--threads", str(a.threads)]  # fmt: skip
        res = run_child("fastpath_decoder", [framework, *flags])
        first, second = FORMS[framework]
        for job, t in res["times"].items():
            row = paired(f"decoder {framework} {job} {first}/{second}", t[first], t[second])
            print(row.line(), flush=True)
            rows.append(row)
        notes["frameworks"][framework] = res
    notes["load_after"] = [round(v, 2) for v in os.getloadavg()]
    report("fastpath_decoder", rows, notes)
    return 0
