"""The generated source as a third denominator of lowering overhead: lowered step vs the step of
the file ``rosetta code`` writes, per backend and workload.

``python -m benchmarks generated_vs_lowered [--backends torch,jax] [--workloads cnn,gru,resnet50]
[--rounds N] [--batch N] [--image-size N] [--threads N]``

For each (backend, workload) the generated file is written to a temporary folder and imported as
a module (NumPy and its framework only), the lowered model is built by ``rosetta.backends.make``
from the same canonical weights, and both first show that they compute the same forward outputs
(the spec's float32 forward tolerance). Then their steps are timed interleaved after warm-up, in
one process (``benchmarks.common.interleaved``): the train step for training workloads (dropout
on in both), the features step for ResNet-50. The figure is the median ratio lowered / generated
with a bootstrap 95% interval; the target is within 1.05 either way. Both sides run the same
threads (the framework's default for the process, or ``--threads``).

The adapters below only call what the generated file defines (its model, ``load_weights``,
``make_optimizer`` and train or features step) and feed it the batch in its own layout, as a
user of the file would.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

from benchmarks.common import Ratio, interleaved, random_batch, ratio, report
from rosetta import codegen
from rosetta.backends import make
from rosetta.spec import canonical_weights, get_workload
from rosetta.spec.workload import Workload

#: the issue's step sizes: cnn train at 64, gru train at 64 x 150, resnet50 features at 32
BATCH = {"cnn": 64, "gru": 64, "resnet50": 32}
ROUNDS = {"cnn": 20, "gru": 20, "resnet50": 8}
Step = Callable[[], object]


def import_generated(w: Workload, backend: str, folder: Path) -> ModuleType:
    """Write the generated file of ``w`` x ``backend`` into ``folder`` and import it."""
    gen = codegen.generate(w, backend)
    path = folder / gen.name
    path.write_text(gen.text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


# -- adapters: (timed step, forward in evaluation mode as NumPy) over a generated module ------
def _numpy_ref(m, w, weights, x, y):
    net = m.build()
    params = {n: np.array(weights[n], dtype="float32") for n in m.SHAPES}
    rng = np.random.default_rng(0)
    fwd = lambda: m.features_step(net, params, x)  # noqa: E731
    if y is None:
        return fwd, fwd
    opt = m.make_optimizer()
    return (lambda: m.train_step(net, params, opt, x, y, rng)), fwd


def _torch(m, w, weights, x, y):
    import torch

    model = getattr(m, w.name.capitalize())()
    m.load_weights(model, weights)
    xt = torch.from_numpy(x.astype(np.int64) if x.dtype.kind == "i" else x)
    fwd = lambda: m.features_step(model, xt).numpy()  # noqa: E731
    if y is None:
        return (lambda: m.features_step(model, xt)), fwd
    opt, yt = m.make_optimizer(model), torch.from_numpy(y)
    return (lambda: m.train_step(model, opt, xt, yt)), fwd


def _tensorflow(m, w, weights, x, y):
    model = m.build_model()
    m.load_weights(model, weights)
    xt = x if x.dtype.kind == "i" else x.transpose(0, 2, 3, 1).copy()
    fwd = lambda: np.asarray(m.features_step(model, xt))  # noqa: E731
    if y is None:
        return (lambda: m.features_step(model, xt)), fwd
    step = m.make_train_step(model, m.make_optimizer(model))
    return (lambda: step(xt, y)), fwd


def _jax(m, w, weights, x, y):
    import jax

    p = m.load_weights(weights)
    xt = x if x.dtype.kind == "i" else x.transpose(0, 2, 3, 1).copy()
    fwd = lambda: np.asarray(m.features_step(p, xt))  # noqa: E731
    if y is None:
        return (lambda: m.features_step(p, xt)), fwd
    params = {n: a for n, a in p.items() if n in m.TRAINABLE}
    buffers = {n: a for n, a in p.items() if n not in m.TRAINABLE}
    opt = m.make_optimizer()
    train_step = m.make_train_step(opt)
    state = {"params": params, "opt": opt.init(params), "key": jax.random.PRNGKey(0)}

    def step():
        state["key"], rng = jax.random.split(state["key"])
        state["params"], state["opt"], loss = train_step(
            state["params"], buffers, state["opt"], xt, y.astype(np.int32), rng
        )
        return loss

    return step, fwd


def _chainer(m, w, weights, x, y):
    model = getattr(m, w.name.capitalize())()
    m.load_weights(model, weights)
    xt = x.astype(np.int32) if x.dtype.kind == "i" else x
    fwd = lambda: np.asarray(m.features_step(model, xt).array)  # noqa: E731
    if y is None:
        return (lambda: m.features_step(model, xt)), fwd
    opt = m.make_optimizer(model)
    return (lambda: m.train_step(model, opt, xt, y.astype(np.int32))), fwd


ADAPTERS = {
    "numpy_ref": _numpy_ref,
    "torch": _torch,
    "tensorflow": _tensorflow,
    "jax": _jax,
    "chainer": _chainer,
}


def _block(value: object) -> None:
    """Wait for an asynchronous framework value (JAX) before the clock is read."""
    ready = getattr(value, "block_until_ready", None)
    if callable(ready):
        ready()


def measure(
    backend: str, name: str, rounds: int, n: int, size: int, threads: int | None
) -> tuple[Ratio, dict]:
    """Ratio lowered / generated for one (backend, workload), and its note."""
    w = get_workload(name)
    w = w.at_image_size(size) if size and name == "resnet50" else w
    weights = canonical_weights(w)
    x, y = random_batch(w, n)
    with tempfile.TemporaryDirectory() as tmp:
        module = import_generated(w, backend, Path(tmp))
        gen_step, gen_forward = ADAPTERS[backend](module, w, weights, x, y)
        lowered = make(backend, w, weights, dtype="float32", threads=threads)
        native = next(iter(lowered.loader(x, y, np.arange(len(x)), len(x))))
        # the same function first, else the timing means nothing
        tol = w.tolerances["float32"].forward
        tol.check(gen_forward(), lowered.to_numpy(lowered.predict(native)), "forward")
        if w.task == "train":
            low_step = lambda: lowered.train_step(native)  # noqa: E731
        else:
            low_step = lambda: lowered.predict(native)  # noqa: E731

        def low() -> object:
            value = low_step()
            lowered.sync(value)
            return value

        times = interleaved({"lowered": low, "generated": gen_step}, rounds=rounds, sync=_block)
    r = ratio(f"{backend} {name}", times["lowered"], times["generated"])
    note = {"batch": n, "input": list(w.input.shape), "manifest": lowered.manifest()}
    return r, note


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks generated_vs_lowered", description=__doc__.splitlines()[0]
    )
    p.add_argument("--backends", default=",".join(codegen.BACKENDS))
    p.add_argument("--workloads", default="cnn,gru,resnet50")
    p.add_argument("--rounds", type=int, default=0, help="timed rounds (default per workload)")
    p.add_argument("--batch", type=int, default=0, help="batch size (default: the issue's)")
    p.add_argument("--image-size", type=int, default=0, help="ResNet-50 input size (default 224)")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    rows, notes = [], {}
    for backend in args.backends.split(","):
        for name in args.workloads.split(","):
            rounds = args.rounds or ROUNDS[name]
            r, note = measure(
                backend, name, rounds, args.batch or BATCH[name], args.image_size, args.threads
            )
            rows.append(r)
            notes[r.name] = note
    report("generated_vs_lowered", rows, notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
