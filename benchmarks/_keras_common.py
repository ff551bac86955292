"""What ``lowering_keras_jax`` and ``lowering_keras_torch`` share: the engine chosen before Keras
is imported, and one workload's pair of steps, the lowered Keras model against the hand-written
one (``benchmarks/handwritten/keras_models.py``).

Keras picks its engine once per process, so :func:`setup` configures the backend's runtime
(``runtime_for``: ``KERAS_BACKEND`` set, then ``keras`` imported, and the threads) before
anything imports Keras; a benchmark process runs one engine. :func:`prepare` builds the lowered
model (``rosetta.backends.make``, float32, its default fast path), the hand-written model in the
data format and dtype the lowered one runs, copies the lowered weights into it by position,
checks the two forward passes in inference mode equal (float32, 1e-4 relative:
``_lowering.assert_same``), and hands ``benchmarks._lowering.run`` the two training steps (cnn,
gru, transformer: the lowered ``train_step`` against ``model.train_on_batch``) or forward passes
(resnet50: the lowered ``predict`` against ``model.predict_on_batch``), on the very same native
batch. Both sides run inside the lowered model's scope (its device; on JAX its precision mode).
The record says each side's step form, jit setting, layout, GRU form and optimiser.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from benchmarks._lowering import Pair, assert_same, workload_batch

#: what the hand-written side runs, per fact the record states for both sides
HANDWRITTEN = {
    "gru": "keras.layers.GRU(100) (reset_after=True, Keras' default)",
    "attention": (
        "four layers.Dense (the key's use_bias=False: MultiHeadAttention has one use_bias for "
        "all four) around keras.ops.dot_product_attention with the boolean key mask, the core "
        "MultiHeadAttention calls; masked mean: GlobalAveragePooling1D(x, mask=...)"
    ),
    "optimizer": {
        "cnn": "keras.optimizers.SGD(momentum=0.9), as the lowered side",
        "gru": "keras.optimizers.Adam(epsilon=1e-8): Keras' stock rule, epsilon added before "
        "the bias correction (the lowered SpecAdam adds it after, the spec's Algorithm 1)",
        "transformer": "keras.optimizers.AdamW(weight_decay=0.01, epsilon=1e-8), "
        "exclude_from_weight_decay(var_names=[bias, gamma, beta, embeddings]): Keras' stock "
        "epsilon placement (the lowered SpecAdamW: the spec's)",
    },
}


def setup(backend: str) -> Callable[[argparse.Namespace], dict]:
    """The ``setup`` of ``backend``'s benchmark: its runtime (Keras' engine, the threads)
    configured before anything imports Keras; the runtime and versions go in the record."""

    def configure(args: argparse.Namespace) -> dict:
        from rosetta.backends import load, runtime_for

        runtime = runtime_for(backend, threads=args.threads or None)
        return {"runtime": runtime.as_dict(), "versions": load(backend).versions()}

    return configure


def prepare(backend: str) -> Callable[[str, argparse.Namespace], Pair]:
    """The ``prepare`` of ``backend``'s benchmark (see the module docstring)."""

    def pair(name: str, args: argparse.Namespace) -> Pair:
        return _pair(backend, name, args)

    return pair


def _pair(backend: str, name: str, args: argparse.Namespace) -> Pair:
    from benchmarks.handwritten import keras_models as hw
    from rosetta.backends import make
    from rosetta.spec import canonical_weights

    w, x, y = workload_batch(name, args.image_size)
    lowered = make(backend, w, canonical_weights(w), dtype="float32", threads=args.threads or None)
    batch = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))  # the same tensors
    with lowered.scope():
        hand = hw.build(name, data_format=lowered.fast.data_format, image_size=args.image_size)
        hw.copy_weights(lowered.net, hand)
        # the same function first (inference: no dropout), else the timing means nothing
        assert_same(lowered.to_numpy(lowered.predict(batch)), hw.features_step(hand, batch[0]))
    facts = _facts(name, lowered)
    train = w.task == "train"
    if train:
        hw.compile_for_training(hand, name, w.optimizer, jit_compile="auto")
        facts["handwritten"]["step"] = (
            f"model.train_on_batch(x, y); compile(jit_compile='auto' -> {hand.jit_compile})"
        )

    def lowered_step() -> object:
        return lowered.train_step(batch) if train else lowered.predict(batch)

    def hand_step() -> object:
        with lowered.scope():  # the lowered model's device (and, on JAX, precision mode)
            if train:
                return hw.train_step(hand, batch[0], batch[1])
            return hw.features_step(hand, batch[0])

    alternatives = {}
    if backend == "keras_torch" and name == "transformer":  # its option attention's other side
        composed = make(backend, w, canonical_weights(w), dtype="float32",
                        threads=args.threads or None, options={"attention": "keras"})  # fmt: skip
        alternatives["attention_keras"] = lambda: composed.train_step(batch)
    return Pair(lowered_step, hand_step, train=train, batch=len(x), sync=lowered.sync, facts=facts,
                alternatives=alternatives)  # fmt: skip


def _facts(name: str, lowered) -> dict:
    """What the record says of both sides of workload ``name``."""
    man = lowered.manifest()
    facts = {
        "checked": "eval forward (inference mode), float32 1e-4 relative",
        "threads": man.get("threads"),
        "layout": man["layout"],  # both sides'
        "lowered": {
            "step": man["keras_step"] if lowered.optimizer is not None else "predict",
            "step_reason": man["keras_step_reason"],
            "compile": man["compile"],
            "optimizer": man["optimizer"],
        },
        "handwritten": {"step": "model.predict_on_batch(x) (returns NumPy)"},
    }
    if name in ("cnn", "resnet50"):
        facts["layout_reason"] = man["layout_reason"]
        facts["handwritten"]["layout"] = f"{man['layout']}, as the lowered model (per layer)"
    if name == "gru":
        facts["lowered"]["gru"] = man["fused_rnn"]
        facts["handwritten"]["gru"] = HANDWRITTEN["gru"]
        if lowered.engine == "torch" and man["fused_rnn"].startswith("yes"):
            facts["gru_note"] = (
                "the lowered side's fused PyTorch GRU is a fast path the hand-written side does "
                "not take: Keras' layers.GRU, as a Keras user writes it, is a Python loop over "
                "the 150 steps on this engine (its fused path is cuDNN, GPUs only)"
            )
    if name == "transformer":
        facts["lowered"]["attention"] = man["attention"]
        if "fused_attention" in man:
            facts["lowered"]["fused_attention"] = man["fused_attention"]
        facts["handwritten"]["attention"] = HANDWRITTEN["attention"]
    if name in HANDWRITTEN["optimizer"]:
        facts["handwritten"]["optimizer"] = HANDWRITTEN["optimizer"][name]
    return facts
