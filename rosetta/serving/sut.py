"""The system under test LoadGen drives, and the query-sample library it draws from.

:class:`Predictor` is a backend's prediction path as a server runs it: a list of sample indices
in, their outputs (canonical NumPy) out, through ``predict_numpy`` at a batch size from a fixed
set (``buckets``: powers of two up to the max batch). A batch of another size is padded up to
the next bucket with copies of its last sample, and the padding's outputs dropped, so a
framework that compiles per input shape (XLA, a TF graph, OpenVINO) compiles each bucket once,
before the clock (``warm``), never while LoadGen measures.

:class:`Batcher` is the dynamic batcher every backend gets in Server and Offline: queries wait
in one queue; a worker thread takes up to ``max_batch`` samples, waiting at most ``max_wait_s``
after the first for more, runs them as one batch and completes them. SingleStream and
MultiStream run each query as it comes (LoadGen sends the next only after).

Responses: LoadGen reads each sample's output bytes (float32, the output's canonical layout)
inside ``QuerySamplesComplete``, and in accuracy mode logs them; the arrays live until it
returns.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Batching:
    """The dynamic batcher's policy, the same for every backend (recorded)."""

    max_batch: int = 8
    max_wait_s: float = 0.002

    def buckets(self) -> tuple[int, ...]:
        """The batch sizes a backend runs: 1, 2, 4, ... up to ``max_batch`` (and it)."""
        out, b = [], 1
        while b < self.max_batch:
            out.append(b)
            b *= 2
        return (*out, self.max_batch)

    def as_record(self) -> dict:
        return {"max_batch": self.max_batch, "max_wait_ms": self.max_wait_s * 1e3,
                "buckets": list(self.buckets())}  # fmt: skip


class Predictor:
    """A backend's ``predict_numpy`` over the samples ``x`` at the batching's bucket sizes."""

    def __init__(self, predict: Callable[[np.ndarray], np.ndarray], x: np.ndarray, batching):
        self.predict, self.x, self.batching = predict, x, batching
        self.buckets = batching.buckets()

    def __call__(self, indices: list[int]) -> np.ndarray:
        """The outputs of samples ``indices`` (at most ``max_batch``), float32."""
        n = len(indices)
        size = next(b for b in self.buckets if b >= n)
        idx = list(indices) + [indices[-1]] * (size - n)  # padding: the last sample again
        return np.ascontiguousarray(np.asarray(self.predict(self.x[idx]))[:n], dtype=np.float32)

    def warm(self, rounds: int = 2) -> None:
        """Every bucket run ``rounds`` times before any clock (first-call and compile costs)."""
        for size in self.buckets:
            for _ in range(rounds):
                self([i % len(self.x) for i in range(size)])


def _respond(lg, ids: list[int], outputs: np.ndarray) -> None:
    responses = []
    for qid, row in zip(ids, outputs, strict=True):
        ptr = row.__array_interface__["data"][0]
        responses.append(lg.QuerySampleResponse(qid, ptr, row.nbytes))
    lg.QuerySamplesComplete(responses)  # reads the bytes before it returns


class Batcher:
    """The dynamic batcher (module docstring): ``submit`` from LoadGen's thread, a worker runs
    the batches."""

    def __init__(self, lg, predictor: Predictor, batching: Batching):
        self.lg, self.predictor, self.batching = lg, predictor, batching
        self.queue: queue.Queue = queue.Queue()
        self.batches: list[int] = []  # the size of every batch run (the record's histogram)
        self.error: BaseException | None = None
        self.worker = threading.Thread(target=self._work, name="rosetta-batcher", daemon=True)
        self.worker.start()

    def submit(self, samples) -> None:
        for s in samples:
            self.queue.put((s.id, s.index))

    def stop(self) -> None:
        self.queue.put(None)
        self.worker.join()
        if self.error is not None:
            raise self.error

    def _work(self) -> None:
        closing = False
        while not closing:
            first = self.queue.get()
            if first is None:
                break
            batch = [first]
            deadline = time.perf_counter() + self.batching.max_wait_s
            while len(batch) < self.batching.max_batch:
                left = deadline - time.perf_counter()
                try:
                    item = self.queue.get(timeout=max(left, 0.0)) if left > 0 else (
                        self.queue.get_nowait())  # fmt: skip
                except queue.Empty:
                    break
                if item is None:
                    closing = True
                    break
                batch.append(item)
            try:
                outputs = self.predictor([i for _, i in batch])
            except BaseException as exc:  # noqa: BLE001 - kept, raised by stop(); LoadGen waits
                self.error = exc
                outputs = np.zeros((len(batch), 1), np.float32)
            self.batches.append(len(batch))
            _respond(self.lg, [q for q, _ in batch], outputs)


class SystemUnderTest:
    """LoadGen's SUT and QSL over a :class:`Predictor`: queries run as they come
    (SingleStream, MultiStream) or through a :class:`Batcher` (Server, Offline)."""

    def __init__(self, predictor: Predictor, batched: bool, performance_samples: int):
        import mlperf_loadgen as lg

        self.lg, self.predictor = lg, predictor
        self.batcher = Batcher(lg, predictor, predictor.batching) if batched else None
        self.direct_batches: list[int] = []
        n = len(predictor.x)
        self.sut = lg.ConstructSUT(self._issue, lambda: None)
        self.qsl = lg.ConstructQSL(
            n, min(performance_samples, n), lambda s: None, lambda s: None
        )  # fmt: skip  (the samples stay in memory)

    def _issue(self, samples) -> None:
        if self.batcher is not None:
            self.batcher.submit(samples)
            return
        for start in range(0, len(samples), self.predictor.batching.max_batch):
            part = samples[start : start + self.predictor.batching.max_batch]
            self.direct_batches.append(len(part))
            _respond(self.lg, [s.id for s in part], self.predictor([s.index for s in part]))

    def close(self) -> list[int]:
        """Stop the worker, free LoadGen's objects; the sizes of the batches run."""
        sizes = list(self.direct_batches)
        if self.batcher is not None:
            self.batcher.stop()
            sizes += self.batcher.batches
        self.lg.DestroyQSL(self.qsl)
        self.lg.DestroySUT(self.sut)
        return sizes
