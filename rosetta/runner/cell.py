"""One cell: (backend, workload, profile) measured end to end in the current process.

A cell is one of two kinds (``CellConfig.kind``). The *training run* (round 0 of every cell) runs
the profile's whole training (or feature batches) with every clock below, the test accuracy, the
loss curve and batch-1 latency. A *timing round* (rounds >= 1) is a fresh process that imports,
builds, warms up and times a fixed number of steps (``timing_steps`` after ``timing_warmup``):
the steady state only, cheap enough that several rounds give an interval between processes.

``Cell`` splits the measurement into the steps a person reads in the backend's notebook
(environment, spec, native model, gate, timed run, record); ``run_cell`` runs them all. The
notebooks and ``rosetta bench`` call the same steps, so their records are the same schema.

The clocks follow METHODOLOGY.md:

- *cold start* = backend import + build + the first step (compilation, autotune land here);
  the import alone is recorded too (``import_s``);
- *end to end* = the whole training run as a user's loop runs it: native batches from the
  backend's own loader, the loss left on the device and read back once per epoch; for feature
  extraction, the timed batches;
- *steady state* = the per-step distribution, sampled in the same run: every ``sample_every``-th
  step after the first is bracketed by a device sync and timed alone. With ``sample_every = 1``
  every step is synced; on a CPU backend that costs nothing (its steps are synchronous), while on
  an asynchronous device it puts one sync per step into the end-to-end figure, so GPU runs use a
  larger ``sample_every`` and let the other steps flow. End to end / steps therefore equals the
  steady median plus the loader's and the Python loop's share; the report shows both.

The equivalence gate (forward, loss, gradients, 3 optimiser steps) runs before any step and
outside every clock. ``python -m rosetta.runner.cell --config JSON`` runs one cell without a
notebook and writes its record (the papermill path is ``rosetta.runner.papercell``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from rosetta import backends
from rosetta.datasets import epoch_order
from rosetta.errors import RosettaError
from rosetta.runner import clock, generation, latency, manifest, records
from rosetta.runner.config import CellConfig
from rosetta.runner.data import DATA_CACHE, feature_images, load_cell_data
from rosetta.runner.gate import GateResult, run_gate
from rosetta.runner.gatebatch import gate_indices
from rosetta.runner.profiles import batch_flag, effective_profile
from rosetta.runner.steps import Steps, clocks_of, timed_steps
from rosetta.runtime import Runtime
from rosetta.spec import canonical_weights, get_workload
from rosetta.spec.facts import spec_facts
from rosetta.spec.loader import PRECISION_TOLERANCES

GATE_BATCH = 4  # samples in the equivalence gate's fixed batch (2 for the features)
FORWARD_STEPS = 20  # timed forward batches of a forward-only backend's training workload (at least)
SPREAD_FLAG = 0.10  # steady-state IQR / median above which a cell's steps are flagged as uneven
#: the flag of a training run whose every step but the cold first one went unsampled
NO_WARM_SAMPLE = "steady state: no warm step sampled; the figure is the cold first step"


class Cell:
    """One cell's measurement, step by step (each step needs the ones before it)."""

    def __init__(self, config: CellConfig):
        config.check_kind()
        self.config = config
        self.started = time.time()
        self.load_before = manifest.load_snapshot()
        self.timing: dict[str, float] = {}
        self.module = None
        self.runtime: Runtime | None = None
        self._resolve_runtime()  # first: the banner, the manifest, sampling and failures use it
        spec = get_workload(config.workload)
        self.spec_profile = spec.profile(config.profile)
        # the effective batch (config.batch_size, else the profile's) sizes the timed loop;
        # sample counts stay the profile's (rosetta.runner.profiles)
        self.profile = effective_profile(self.spec_profile, config.batch_size, spec.task)
        self.workload = self.profile.workload_for(spec)  # features: the profile's input size
        self.flags: list[str] = []  # each flag's text, and beside it its code (records.FLAG_CODES)
        self.flag_codes: list[str] = []
        # a training workload on a forward-only backend (a serving engine): the cell gates and
        # times the forward pass over the test data at the cell's batch (``_forward``)
        self.forward_only = spec.task == "train" and bool(
            backends.training_unsupported(config.backend, self.module)
        )
        # the optimiser's settings matter only to a cell that trains (an engine never does)
        task = "features" if self.forward_only else spec.task
        flag = batch_flag(self.spec_profile.batch_size, self.profile.batch_size, task)
        if flag:
            self.flag("batch", flag)
        self.data = None
        self.model = None
        self.gate_result: GateResult | None = None
        self.result: dict | None = None

    def flag(self, code: str, text: str) -> None:
        """Note a flag on the record: its ``code`` (one of ``records.FLAG_CODES``) and its text."""
        if code not in records.FLAG_CODES:
            raise ValueError(f"unknown flag code {code!r}; known: {', '.join(records.FLAG_CODES)}")
        self.flags.append(text)
        self.flag_codes.append(code)

    def _resolve_runtime(self) -> None:
        """Import the backend (its cost is ``import_s``) and configure this process from the
        config's request: threads, then the device (``auto`` resolved here, in the process that
        runs the cell), then the numeric policy. Bad values end here, before any work."""
        cfg = self.config
        request = cfg.runtime_request()
        t0 = clock.now_ns()
        self.module = backends.load(cfg.backend)
        ok, why = self.module.available()  # imports the framework
        if not ok:
            raise RosettaError(f"backend {cfg.backend!r} cannot run here: {why}")
        self.timing["import_s"] = (clock.now_ns() - t0) / 1e9
        self.runtime = self.module.configure(request)

    # -- step 1: what runs where ----------------------------------------------------------------
    def environment(self) -> dict:
        """The machine and software facts (the backend's own are added after ``build``); GPU
        facts where the resolved runtime runs on CUDA."""
        return manifest.environment(self.runtime.device)

    @property
    def sample_every(self) -> int:
        """Every n-th training step is synced and timed: the config's value, else 1 on the CPU
        (steps are synchronous) and 4 on CUDA, decided from the *resolved* device."""
        if self.config.sample_every:
            return self.config.sample_every
        return 4 if self.runtime.device == "cuda" else 1

    def spec_table(self) -> list[tuple[str, str, str, str]]:
        """The spec as rows (layer, op, output shape per sample, parameters)."""
        from rosetta.spec.graph import walk

        rows = []
        for node, _, out in walk(self.workload.graph, self.workload.input.shape):
            params = node.param_specs(_)
            n = sum(int(np.prod(p.shape)) for p in params if p.trainable)
            rows.append(
                (
                    getattr(node, "name", ""),
                    type(node).__name__,
                    str(list(out)),
                    f"{n:,}" if n else "",
                )
            )
        return rows

    # -- step 2: data, weights, the native model -------------------------------------------------
    def build(self):
        """Load the data and canonical weights and build the model under the runtime in effect
        (resolved when the cell was made). ``import_build_s`` is the import plus this build."""
        cfg, w, prof = self.config, self.workload, self.profile
        cache = Path(cfg.out).parent / DATA_CACHE if cfg.out else None  # the run's own
        self.data = load_cell_data(w, prof, cfg.data_dir, cache)
        for note in self.data.notes:  # a data-cache file refused (decoded again instead)
            self.flag("data_cache", note)
        self._check_data()
        self.params = canonical_weights(w, cfg.seed)
        t0 = clock.now_ns()
        self.model = self.module.build(w, self.params, self.runtime)
        self.model.sync()
        self.timing["import_build_s"] = self.timing["import_s"] + (clock.now_ns() - t0) / 1e9
        return self.model

    def _check_data(self) -> None:
        prof, d = self.profile, self.data
        if self.workload.task != "train":
            return
        if len(d.y_train) < prof.batch_size:
            raise RosettaError(
                f"{self.config.workload}: only {len(d.y_train)} train samples, fewer than one "
                f"batch of {prof.batch_size}; use a smaller --batch-sizes or more data"
            )
        if len(d.y_test) < prof.batch_size:
            raise RosettaError(
                f"{self.config.workload}: only {len(d.y_test)} test samples, fewer than one batch "
                f"of {prof.batch_size}; use a data set with at least {prof.test_samples} "
                f"(rosetta data synth --force writes the full synthetic one)"
            )
        for part, have, want in (
            ("train", len(d.y_train), prof.train_samples),
            ("test", len(d.y_test), prof.test_samples),
        ):
            if have < want:
                self.flag(
                    "profile_not_met",
                    f"profile not met: {have} {part} samples of the {want} that profile "
                    f"{prof.name!r} asks for"
                )

    # -- step 3: the equivalence gate ------------------------------------------------------------
    def gate(self) -> GateResult:
        """Compare with the float64 reference (outside every clock), then reset the model."""
        w = self.workload
        module, runtime = self.module, self.runtime
        key = gate_key(w, runtime)  # the tolerance set: the dtype, or the mixed-precision policy

        def build(workload, params, key):  # the same backend again: float64 gate, localising
            if key == "tf32":  # the cell's own float32 runtime, TF32 allowed
                return module.build(workload, params, runtime)
            if key in PRECISION_TOLERANCES:  # the cell's own policy, float32 master weights
                return module.build(workload, params, replace(runtime, precision=key))
            # float64 (the optimiser check) runs with precision fp32: mixed precision has no
            # float64 form, and the optimiser's rule is what that gate is for
            return module.build(workload, params, replace(runtime, dtype=key, precision="fp32"))

        t0 = clock.now_ns()  # the gate's own cost, outside every clock (recorded as gate_s)
        reused, why_not = self._reused_gate()
        if reused is not None:
            self.gate_result = reused
        elif w.task == "train":
            idx = gate_indices(self.data.x_test, GATE_BATCH)  # black, saturated, flat, padded
            x, y = self.data.x_test[idx], self.data.y_test[idx]
            y = None if self.forward_only else y  # forward only: no loss, gradients or steps
            self.gate_result = run_gate(self.model, w, self.params, x, y, key, build=build)
            self.model.set_params(self.params)  # nothing of the gate stays (weights, optimiser)
        else:
            x = feature_images(w, 0, 2)
            self.gate_result = run_gate(self.model, w, self.params, x, None, key, build=build)
        if why_not:
            self.flag("gated_here", f"gated in this cell: {why_not}")
        self.timing["gate_s"] = (clock.now_ns() - t0) / 1e9
        return self.gate_result

    def _reused_gate(self) -> tuple[GateResult | None, str]:
        """The passing verdict of ``config.gate_from`` (a record of this run that gated the same
        function: ``CellConfig.gate_identity``, on the same resolved device), or ``None`` and
        why not when it cannot be used; then this cell gates itself."""
        cfg = self.config
        if not cfg.gate_from:
            return None, ""
        try:
            raw = Path(cfg.gate_from).read_bytes()  # the verdict is bound to the bytes it read
            if hashlib.sha256(raw).hexdigest() != cfg.gate_sha256:
                return None, f"{cfg.gate_from} changed since the run read its verdict (sha256)"
            rec = records.loads_strict(raw.decode())
            source = CellConfig(**rec["config"])
            eq = rec["equivalence"]
            if rec["status"] != "ok" or not eq.get("equivalent"):
                return None, f"{cfg.gate_from} holds no passing gate"
            if source.gate_identity() != cfg.gate_identity():
                return None, f"{cfg.gate_from} gated another function (its config differs)"
            if rec["manifest"]["runtime"]["device"] != self.runtime.device:
                return None, f"{cfg.gate_from} ran on another device"
            key = eq.get("reused_from") or records.cell_key(source)
            return GateResult.from_dict(eq, key), ""
        except (RosettaError, OSError, KeyError, TypeError, ValueError) as exc:
            return None, f"the gate of {cfg.gate_from} could not be read ({exc})"

    # -- step 4: the timed run -------------------------------------------------------------------
    def run(self, progress=None) -> dict:
        """The timed run: a training run (training epochs + test accuracy, the feature batches,
        or a forward-only backend's forward pass over the test data) or a timing round
        (``config.kind``)."""
        if self.config.kind == "timing":
            self.result = self._timing(progress)
        elif self.forward_only:
            self.result = self._forward(progress)
        elif self.workload.task == "train":
            self.result = self._train(progress)
        else:
            self.result = self._features(progress)
        flag = noise_flag(self.result["clocks"]["steady"])
        if flag:
            self.flag("noisy", flag)
        if self.config.kind == "training" and self.config.round == 0:  # once per point
            self.result["metrics"].update(self.latency())  # after the run, outside its clocks
            gen = self.profile.generate
            # a decoder: its generation run (a serving engine's too: it generates, untrained)
            if gen is not None and (self.model.GENERATES or not self.forward_only):
                key = gate_key(self.workload, self.runtime)  # bf16's bounds under bf16
                out = generation.measure(self.model, self.workload, gen, self.data.x_test, key)
                self.result["metrics"]["generation"] = out
                g = out.get("gate", {})
                if g and not g["equivalent"]:
                    self.flag(
                        "generation",
                        f"generation gate failed: logits {g['logits_violation']:.3g}x the "
                        f"forward bound at step {g['worst_step']}, tokens equal "
                        f"{g['tokens_equal']}",
                    )
        return self.result

    # -- step 4, a timing round: a fixed number of steps, nothing else ---------------------------
    def _timing(self, progress) -> dict:
        """A timing round (``config.kind == "timing"``): the first step (cold, its time kept apart
        as in every cell), ``timing_warmup`` untimed steps, then ``timing_steps`` steps each
        bracketed by syncs (the steady state). Training steps take the profile's training data
        in the run's sample order, epoch after epoch as needed; feature steps take the generated
        images. No test evaluation, no losses kept (the last one is read back once to check it
        is finite), no latency: the training run (round 0) has those."""
        cfg, prof, model, w = self.config, self.profile, self.model, self.workload
        n, bs = 1 + cfg.timing_warmup + cfg.timing_steps, prof.batch_size
        train = w.task == "train" and not self.forward_only
        if train:
            batches, step = self._cycled_train_batches(), model.train_step
        elif self.forward_only:  # as ``_forward``: the test data, cycled, the next batch timed
            k = len(self.data.y_test) // bs * bs
            order = np.resize(np.arange(k), n * bs)
            batches, step = model.loader(self.data.x_test, None, order, bs), model.predict
        else:  # as the feature run: the images made before any clock, the next batch timed
            x = feature_images(w, 0, n * bs)
            batches, step = model.loader(x, None, np.arange(n * bs), bs), model.predict
        run = timed_steps(
            model, step, batches, n, discard=cfg.timing_warmup, fetch_in_clock=not train,
            progress=progress and (lambda k: progress(k, n)),
        )  # fmt: skip
        if train and not np.isfinite(float(model.to_numpy(run.last))):
            self.flag("non_finite_loss", "non-finite training loss")
        # the timed steps back to back (no end to end)
        clocks = clocks_of(run, bs, timed_s=float(sum(run.samples)))
        return {
            "clocks": clocks,
            "metrics": {
                "timing_steps": cfg.timing_steps,
                "timing_warmup": cfg.timing_warmup,
                **({"mode": "forward"} if self.forward_only else {}),
            },
        }

    def _cycled_train_batches(self):
        """The training data's native batches in the run's sample order, epoch after epoch."""
        cfg, data = self.config, self.data
        epoch = 0
        while True:
            order = epoch_order(len(data.y_train), shuffle=True, seed=cfg.seed, epoch=epoch)
            yield from self.model.loader(data.x_train, data.y_train, order, self.profile.batch_size)
            epoch += 1

    # -- step 4b: batch-1 latency (after the timed run, outside every clock) --------------------
    def latency(self) -> dict:
        """``latency`` (single synchronised requests at batch 1 through ``predict``, the whole
        distribution: ``rosetta.runner.latency``) and ``throughput_at_batch`` (the timed run's
        samples/s at this cell's batch; the report takes the largest batch of a sweep).

        Measured in round 0 only: rounds repeat a point to learn the spread of its step time
        between processes; a second latency loop of the same point would add its cost (200
        requests: 0.2-16 s per cell on the 2-core machine, ~75 s per smoke round) to every
        round without adding a figure the report shows. Batch-1 latency does not depend on the
        timed batch either, so ``rosetta bench`` asks for it (``config.latency``) at the first
        batch size of each (function, thread count) only."""
        w, prof = self.workload, self.profile
        clocks = self.result["clocks"]
        out = {
            "throughput_at_batch": {
                "batch": prof.batch_size,
                "samples_per_s": clocks["throughput_samples_per_s"],
                "what": "train step" if w.task == "train" and not self.forward_only else "predict",
            },
        }
        if not self.config.latency:
            return out
        plan = latency.LatencyPlan.for_profile(self.config.profile)
        if w.task == "train":
            x = self.data.x_test[: latency.POOL]
        else:
            x = feature_images(w, 0, latency.POOL)
        return {"latency": latency.measure(self.model, x, plan), **out}

    def memory(self) -> dict:
        """Peak resident memory of this process and, where the framework reports it, peak device
        memory: bytes and bytes per sample of the cell's batch (``metrics.memory``)."""
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
        device = getattr(self.model, "peak_device_memory_bytes", lambda: None)()
        return latency.memory(rss, device, self.profile.batch_size)

    def _train(self, progress) -> dict:
        """A training run: the profile's epochs through the one timed loop (every
        ``sample_every``-th step sampled, the first kept apart as the cold start, losses native
        until each epoch's end), then the test set's forward pass for the accuracy."""
        cfg, prof, data, model = self.config, self.profile, self.data, self.model
        steps: list[float] = []
        losses: list[float] = []
        first_s = None
        step = 0
        total = prof.epochs * (len(data.y_train) // prof.batch_size)
        start = clock.now_ns()
        for epoch in range(prof.epochs):
            order = epoch_order(len(data.y_train), shuffle=True, seed=cfg.seed, epoch=epoch)
            run = timed_steps(
                model, model.train_step,
                model.loader(data.x_train, data.y_train, order, prof.batch_size),
                cold=first_s is None, sample_every=self.sample_every, first_step=step,
                keep_outputs=True, progress=progress and (lambda k: progress(k, total)),
            )  # fmt: skip
            first_s = run.first_s if first_s is None else first_s
            steps.extend(run.samples)
            step += run.steps
            losses.extend(float(model.to_numpy(v)) for v in run.outputs)  # once per epoch
        train_s = (clock.now_ns() - start) / 1e9
        correct = total_test = test_samples = 0
        nll_sum = 0.0
        bs = prof.batch_size
        t_eval = clock.now_ns()  # the forward pass over the test set, predictions on the host
        for b, batch in enumerate(
            model.loader(data.x_test, data.y_test, np.arange(len(data.y_test)), bs)
        ):
            logits = model.to_numpy(model.predict(batch))  # (N, K), or (N, T, K): a label a token
            labels = data.y_test[b * bs : (b + 1) * bs]
            correct += int(np.sum(logits.argmax(axis=-1) == labels))
            total_test += labels.size
            test_samples += len(labels)
            if logits.ndim == 3:  # a language model: its perplexity too
                nll_sum += _nll_sum(logits, labels)
        eval_s = (clock.now_ns() - t_eval) / 1e9
        if not steps:  # one step in all: the only figure there is includes the cold start
            self.flag("no_warm_sample", NO_WARM_SAMPLE)
        if not all(np.isfinite(losses)):
            self.flag("non_finite_loss", "non-finite training loss")
        sampled = Steps(first_s=first_s, samples=steps or [first_s])
        return {
            "clocks": clocks_of(sampled, bs, self.sample_every, end_to_end_s=train_s),
            "metrics": {
                "test_accuracy": correct / total_test,  # of the tokens, for a language model
                "test_samples": test_samples,
                **({"test_perplexity": _finite(float(np.exp(nll_sum / total_test)))}
                   if nll_sum else {}),  # fmt: skip
                "steps": step,
                "loss_first": _finite(losses[0]),
                "loss_last": _finite(losses[-1]),
                "losses": [_finite(v) for v in losses],
                # the trained model's forward pass at the cell's batch (the test set, once,
                # through the loader, predictions copied to the host): the serving view's figure
                "predict_at_batch": {
                    "batch": bs,
                    "samples_per_s": test_samples / eval_s if eval_s > 0 else None,
                },
            },
        }

    def _forward(self, progress) -> dict:
        """A training workload on a forward-only backend (a serving engine): the forward pass at
        the cell's batch over the test data (cycled to at least ``FORWARD_STEPS`` batches), the
        first batch the cold start, each later one synced and timed, as feature extraction is.
        Nothing trains, so there is no accuracy: the gate compared this forward pass with the
        reference's on the canonical weights."""
        prof, data, model = self.profile, self.data, self.model
        bs = prof.batch_size
        n = len(data.y_test) // bs * bs  # whole batches (the data check left at least one)
        per_pass = n // bs
        order = np.concatenate([np.arange(n)] * (1 + -(-FORWARD_STEPS // per_pass)))
        total = max(FORWARD_STEPS, per_pass)
        run = timed_steps(
            model, model.predict, model.loader(data.x_test, None, order, bs), 1 + total,
            fetch_in_clock=True, progress=progress and (lambda k: progress(k, 1 + total)),
        )  # fmt: skip
        stats = clock.summarize(run.samples)
        return {
            "clocks": clocks_of(run, bs, end_to_end_s=run.wall_s),
            "metrics": {
                "mode": "forward",
                "samples": total * bs,
                "time_per_1000_samples_s": run.wall_s / (total * bs) * 1000,
                "predict_at_batch": {"batch": bs, "samples_per_s": bs / stats.median},
            },
        }

    def _features(self, progress) -> dict:
        """Feature extraction: ``warmup_batches`` forward passes (the first the cold start, the
        rest dropped), then ``batches`` timed ones, each batch made before any clock."""
        prof, w, model = self.profile, self.workload, self.model
        bs, n_warm = prof.batch_size, prof.warmup_batches
        n = n_warm + prof.batches
        x = feature_images(w, 0, n * bs)  # made before any clock
        run = timed_steps(
            model, model.predict, model.loader(x, None, np.arange(len(x)), bs), n,
            cold=n_warm > 0, discard=max(n_warm - 1, 0), fetch_in_clock=True,
            progress=progress and (lambda k: progress(k, n)),
        )  # fmt: skip
        if run.first_s is None:  # no warm-up batch: the first timed one stands for the cold start
            run.first_s = run.samples[0]
        return {
            "clocks": clocks_of(run, bs, end_to_end_s=run.wall_s),
            "metrics": {
                "time_per_1000_images_s": run.wall_s / (prof.batches * bs) * 1000,
                "images": prof.batches * bs,
                "image_size": int(w.input.shape[1]),
                "feature_dim": int(model.to_numpy(run.last).shape[1]),
            },
        }

    # -- step 5: the record ----------------------------------------------------------------------
    def record(self) -> dict:
        """The cell's record (status ``ok``), in the schema of ``rosetta.runner.records``."""
        cfg, result = self.config, dict(self.result)
        result["metrics"] = {**result["metrics"], "memory": self.memory()}
        clocks = dict(result.pop("clocks"))
        clocks["import_s"] = self.timing["import_s"]
        clocks["import_build_s"] = self.timing["import_build_s"]
        clocks["gate_s"] = self.timing.get("gate_s")  # outside cold start and every other clock
        # the cold start and its parts, each as measured: import, build, the first step
        clocks["build_s"] = self.timing["import_build_s"] - self.timing["import_s"]
        clocks["cold_start_s"] = self.timing["import_build_s"] + clocks["first_step_s"]
        env = self.environment()
        env.update(
            backend_versions=self.module.versions(),
            fast_path=fast_path(self.model.manifest(), self.runtime, cfg.backend),
            runtime=self.runtime.as_dict(),  # every runtime value in effect, stored once here
            data_source=self.data.source,
            data_checksum=self.data.checksum,
            data_cut_digest=self.data.cut_digest,
            input_shape=list(self.workload.input.shape),
        )
        peak_device = getattr(self.model, "peak_device_memory_bytes", lambda: None)()
        return records.make_record(
            backend=cfg.backend,
            workload=cfg.workload,
            profile=cfg.profile,
            status="ok",
            run_id=cfg.run_id,
            config=cfg.as_dict(),
            equivalence=self.gate_result.as_dict(),
            manifest=env,
            clocks=clocks,
            peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            peak_device_memory_mb=None if peak_device is None else peak_device / 2**20,
            load={"before": self.load_before, "after": manifest.load_snapshot()},
            flags=list(self.flags),
            flag_codes=list(self.flag_codes),
            spec=spec_facts(
                self.workload, self.spec_profile.batch_size, self.profile.batch_size,
                self.runtime.precision,
            ),  # fmt: skip
            wall_s=time.time() - self.started,
            pid=os.getpid(),
            **result,
        )

    def failure(self, error: str) -> dict:
        """The ``failed`` record of a cell that stopped after its runtime was resolved: the
        config, the machine and the runtime in effect (the resolved device), the error."""
        cfg = self.config
        env = self.environment()
        env.update(runtime=self.runtime.as_dict(), data_source=cfg.data_source or "unknown")
        return records.make_record(
            backend=cfg.backend,
            workload=cfg.workload,
            profile=cfg.profile,
            status="failed",
            error=" ".join(error.split())[:500] or "failed",
            run_id=cfg.run_id,
            config=cfg.as_dict(),
            manifest=env,
        )


def fast_path(model_manifest: dict, runtime: Runtime, backend: str) -> dict:
    """The model's fast-path manifest as the record stores it: without the values it copies
    from the runtime (threads, dtype, precision, TF32, a plain device) or the record's own
    backend, which the record holds once (``manifest.runtime``, ``backend``); a key whose value
    says more than the runtime (``cuda (<GPU name>)``) stays."""
    rt = runtime.as_dict()
    return {
        k: v
        for k, v in model_manifest.items()
        if not (k in rt and v == rt[k]) and not (k == "backend" and v == backend)
    }


def noise_flag(steady: dict) -> str | None:
    """The flag for uneven steady-state steps, or None.

    A robust spread, IQR / median, above :data:`SPREAD_FLAG`: one slow step (a page fault, a
    context switch) cannot trip it, as it did the old CV > 10% rule; bimodal or widely spread
    steps do. Whether that noise could change a verdict needs the other backends, so the report
    decides that (``rosetta.report.stats.noise_matters``); METHODOLOGY.md states the rule."""
    med, q25, q75 = steady.get("median"), steady.get("q25"), steady.get("q75")
    if not (steady.get("n", 0) > 1 and med and med > 0 and q25 is not None and q75 is not None):
        return None
    spread = (q75 - q25) / med
    if spread <= SPREAD_FLAG:
        return None
    return (
        f"steady-state spread (IQR/median) {spread:.0%} > {SPREAD_FLAG:.0%}: uneven steps "
        "(the report says whether it could change a verdict)"
    )


def gate_key(workload, runtime: Runtime) -> str:
    """The tolerance set a cell's gate uses: the policy's (``bf16``) for mixed precision,
    ``tf32`` for a float32 cell with TF32 allowed (its matmuls and convolutions round their inputs
    to 10 significand bits: not float32's answer, measured on an H200 at 38-55x the float32
    forward bounds; docs/gpu/), else the dtype's. A workload whose YAML has no set for the policy
    is one clear error."""
    if runtime.precision == "fp32" and not (runtime.tf32 and runtime.dtype == "float32"):
        return runtime.dtype
    key = runtime.precision if runtime.precision != "fp32" else "tf32"
    if key not in workload.tolerances:
        raise RosettaError(
            f"workload {workload.name!r} states no {key} tolerances (add tolerances.{key} to "
            f"its YAML, derived as in gru.yaml) or run " + ("without --tf32" if key == "tf32"
                                                             else "fp32")
        )
    return key


def _finite(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None  # records are strict JSON


def run_cell(config: CellConfig, progress=None) -> dict:
    """Measure one cell, all steps, and return its record."""
    cell = Cell(config)
    cell.build()
    cell.gate()
    cell.run(progress)
    return cell.record()


def main(argv: list[str] | None = None) -> int:
    """``python -m rosetta.runner.cell --config JSON``: run one cell, write its record. A cell
    that fails after its runtime was resolved writes its own ``failed`` record, naming the
    runtime in effect (the resolved device); earlier, the driver writes it."""
    p = argparse.ArgumentParser(prog="python -m rosetta.runner.cell")
    p.add_argument("--config", required=True, help="a CellConfig as JSON")
    args = p.parse_args(argv)
    cell = None
    try:
        config = CellConfig.from_json(args.config)
        cell = Cell(config)
        cell.build()
        cell.gate()
        cell.run()
        record = cell.record()
    except RosettaError as exc:
        print(f"rosetta: error: {exc}", file=sys.stderr)
        if cell is not None and cell.config.out:
            records.write_record(Path(cell.config.out), cell.failure(str(exc)))
        return 2
    records.write_record(Path(config.out), record)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def _nll_sum(logits: np.ndarray, labels: np.ndarray) -> float:
    """The summed -log softmax(logits)[label] over every position (float64, stable)."""
    z = logits.astype(np.float64).reshape(-1, logits.shape[-1])  # (N*T, K)
    top = z.max(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(z - top).sum(axis=1))
    return float((lse - z[np.arange(len(z)), labels.reshape(-1)]).sum())
