"""The decoder in PyTorch, lowered vs hand-written: the training step and greedy generation.

``python -m benchmarks decoder_torch [--rounds N] [--gen-rounds N] [--threads N]
[--prompt-len P] [--new-tokens T] [--batches 1,8]``

The lowered model (``rosetta.backends.torch`` on the decoder's canonical weights) and the
hand-written nanoGPT-shaped model (``benchmarks/handwritten/torch_models.py``: its own blocks,
its own tied head, its own KV-cache loop) are first shown to compute the same logits and to
generate the same greedy tokens; then, interleaved in one process: the training step (batch 16
x 128 tokens, AdamW) and one whole generation per batch size (prompt, then one token a step,
each token copied to the host as a server streams it). Writes ``out/decoder_torch.json``:
lowered / hand-written with its interval (target <= 1.05) per row, TTFT-inclusive tokens/s of
each side, the load before and after.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks import _torch_common as tc
from benchmarks._lowering import assert_same
from benchmarks.common import interleaved, ratio, report, streamed_generation


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks decoder_torch")
    p.add_argument("--rounds", type=int, default=10, help="timed training-step rounds")
    p.add_argument("--gen-rounds", type=int, default=10, help="timed generations per batch")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--batches", default="1,8")
    args = p.parse_args(argv)

    import torch

    from benchmarks.handwritten import torch_models as hw
    from rosetta.runner.generation import greedy
    from rosetta.spec import canonical_weights, get_workload

    w = get_workload("decoder")
    lowered = tc.build(w, canonical_weights(w), "cpu", args.threads or None)
    hand = hw.DecoderNet()
    hw.copy_weights(lowered.net, hand)
    rng = np.random.default_rng(0)
    window = rng.integers(1, 8192, size=(16, 129))
    x, y = window[:, :-1].astype(np.int32), window[:, 1:].astype(np.int64)
    batch = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))
    hand.eval()
    with torch.no_grad():
        assert_same(lowered.predict(batch).numpy(), hand(batch[0]).numpy())
    prompts = x[:8, : args.prompt_len]
    want = greedy(lowered, prompts, args.new_tokens).tokens
    got = hw.generate(hand, torch.as_tensor(prompts, dtype=torch.long), args.new_tokens)
    np.testing.assert_array_equal(got.numpy(), want)  # the same tokens, else nothing to time

    notes: dict = {"torch": torch.__version__, "threads": torch.get_num_threads(),
                   "prompt_len": args.prompt_len, "new_tokens": args.new_tokens}  # fmt: skip
    rows = []
    hand.train()
    o = w.optimizer
    opt = torch.optim.AdamW(hw.adamw_groups(hand, o.weight_decay), lr=o.lr,
                            betas=(o.beta1, o.beta2), eps=o.eps)  # fmt: skip
    before = tc.load_avg()
    times = interleaved(
        {"lowered": lambda: lowered.train_step(batch),
         "handwritten": lambda: hw.lm_train_step(hand, opt, batch[0], batch[1])},
        rounds=args.rounds,
    )  # fmt: skip
    rows.append(ratio("decoder train lowered/handwritten", times["lowered"], times["handwritten"]))
    notes["train"] = {"batch": 16, "load_before": before, "load_after": tc.load_avg(), **times}
    hand.eval()
    for b in (int(v) for v in args.batches.split(",")):
        pb = prompts[:b]
        tb = torch.as_tensor(pb, dtype=torch.long)
        before = tc.load_avg()
        times = interleaved(
            {"lowered": lambda pb=pb: streamed_generation(lowered, pb, args.new_tokens),
             "handwritten": lambda tb=tb: hw.generate(hand, tb, args.new_tokens)},
            rounds=args.gen_rounds,
        )  # fmt: skip
        r = ratio(f"decoder generate b{b} lowered/handwritten", times["lowered"],
                  times["handwritten"])  # fmt: skip
        rows.append(r)
        notes[f"generate_b{b}"] = {
            "load_before": before, "load_after": tc.load_avg(),
            "tokens_per_s_lowered": b * args.new_tokens / r.median_a,
            "tokens_per_s_handwritten": b * args.new_tokens / r.median_b, **times,
        }  # fmt: skip
    report("decoder_torch", rows, notes)
    return 0
