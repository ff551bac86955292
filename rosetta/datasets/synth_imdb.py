"""Synthetic IMDB in the Keras ``imdb.npz`` format (object arrays of word-rank lists).

Each review:

- has a length drawn from a log-normal with median 180 (sd 0.7 in log space), clipped to
  20..800 tokens, like the real reviews (median ~175, long tail);
- draws background words from a Zipf-Mandelbrot law over ranks 1..88000 (so, with the
  default vocabulary of 30000 and ``index_from=3``, ~6% of tokens map to out-of-vocabulary);
- replaces each token, with a per-review probability in [0.03, 0.10], by a sentiment word:
  from its own class's 30-word list with probability 0.85, else from the other class's
  list. Sentiment words have ranks in 20..8000 (inside the vocabulary) and are spread
  uniformly through the review, so the last 150 tokens carry them too.

Labels are exactly balanced and shuffled. Reviews with few sentiment words are genuinely
ambiguous, so a bag-of-words model lands well above chance but below 100%. Sized so that the
spec's GRU (Adam 1e-3, batch 64) leaves chance within its ``smoke`` profile: measured with a
PyTorch copy on 2,048 reviews, test accuracy 0.75 after 64 steps and 0.85 after 128 (with
150-word lists and rates 0.02-0.08 it memorised background words instead: 0.54 / 0.63).

Split ``s`` (1 = train, 2 = test) is drawn from ``default_rng([seed, STREAM, s])``; the zip
entries carry a fixed timestamp, so the same seed gives the same bytes.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from rosetta.datasets.checksums import IMDB_ARCHIVE, remove_sidecar, write_sidecar
from rosetta.datasets.imdb import SYNTHETIC_ARRAY
from rosetta.datasets.paths import atomic_write, ensure_writable_dir, resolve_data_dir
from rosetta.errors import DataError

GENERATOR_VERSION = 2
VOCAB = 88000
_STREAM = 0x1DB
_N_SENTIMENT = 30
_RATE = (0.03, 0.10)  # per-review probability that a token is a sentiment word
_OWN = 0.85  # probability that a sentiment word belongs to the review's class
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def sentiment_words(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The negative-class and positive-class word ranks (30 each, disjoint)."""
    rng = np.random.default_rng([seed, _STREAM])
    words = rng.choice(np.arange(20, 8001), size=2 * _N_SENTIMENT, replace=False)
    return words[:_N_SENTIMENT], words[_N_SENTIMENT:]


def _zipf_cdf(vocab: int) -> np.ndarray:
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    p = 1.0 / (ranks + 2.7) ** 1.05
    return np.cumsum(p) / p.sum()


def synth_reviews(seed: int, split: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` reviews (object array of lists of int ranks) and int64 labels for a split."""
    neg, pos = sentiment_words(seed)
    rng = np.random.default_rng([seed, _STREAM, split])
    labels = rng.permutation(np.arange(n) % 2).astype(np.int64)
    lengths = np.clip(np.rint(rng.lognormal(np.log(180.0), 0.7, size=n)), 20, 800).astype(np.int64)
    total = int(lengths.sum())
    flat = np.searchsorted(_zipf_cdf(VOCAB), rng.random(total), side="right") + 1  # ranks >= 1
    flat = np.minimum(flat, VOCAB)
    owner = np.repeat(np.arange(n), lengths)  # review index of every token
    rate = rng.uniform(*_RATE, size=n)[owner]
    hit = rng.random(total) < rate
    own_class = rng.random(total) < _OWN
    token_class = np.where(own_class, labels[owner], 1 - labels[owner])
    pick = rng.integers(0, _N_SENTIMENT, size=total)
    sentiment = np.where(token_class == 1, pos[pick], neg[pick])
    flat = np.where(hit, sentiment, flat)
    ends = np.cumsum(lengths)
    words = flat.tolist()
    reviews = np.empty(n, dtype=object)
    start = 0
    for i, end in enumerate(ends.tolist()):
        reviews[i] = words[start:end]
        start = end
    return reviews, labels


def _write_npy(zf: zipfile.ZipFile, name: str, arr: np.ndarray) -> None:
    info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    with zf.open(info, "w", force_zip64=True) as fh:
        npy_format.write_array(fh, arr, allow_pickle=True)


def write_synthetic_imdb(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    seed: int = 0,
    n_train: int = 25000,
    n_test: int = 25000,
) -> Path:
    """Write a synthetic ``imdb.npz`` (Keras layout plus a ``rosetta_synthetic`` marker
    array holding a JSON string) and its checksum sidecar. Returns the file path.

    The file loads with ``numpy.load(path, allow_pickle=True)`` exactly like the real one;
    Rosetta's own loader reads it without ``allow_pickle`` (see :mod:`safe_npz`).
    """
    if n_train < 2 or n_test < 2:
        raise DataError(
            f"synthetic IMDB sizes n_train={n_train}, n_test={n_test}: both must be >= 2; "
            "pass other --imdb-train/--imdb-test"
        )
    data_dir = ensure_writable_dir(resolve_data_dir(data_dir))
    target = data_dir / IMDB_ARCHIVE.filename
    info = {
        "dataset": "imdb",
        "seed": seed,
        "n_train": n_train,
        "n_test": n_test,
        "vocab": VOCAB,
        "generator_version": GENERATOR_VERSION,
    }
    x_train, y_train = synth_reviews(seed, 1, n_train)
    x_test, y_test = synth_reviews(seed, 2, n_test)
    remove_sidecar(target)
    with atomic_write(target) as raw:
        with zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            _write_npy(zf, "x_test", x_test)
            _write_npy(zf, "x_train", x_train)
            _write_npy(zf, "y_train", y_train)
            _write_npy(zf, "y_test", y_test)
            _write_npy(zf, SYNTHETIC_ARRAY, np.array(json.dumps(info, sort_keys=True)))
    write_sidecar(target, {"sizes": {"train": n_train, "test": n_test}, **info})
    return target
