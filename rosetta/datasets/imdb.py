"""IMDB sentiment reviews in the Keras ``imdb.npz`` format, with Keras-style preprocessing.

The file holds ``x_train``, ``x_test`` (object arrays of Python lists of word ranks,
1 = most frequent word) and ``y_train``, ``y_test`` (0 = negative, 1 = positive).
Preprocessing reimplements ``keras.datasets.imdb.load_data`` + ``pad_sequences`` (Keras is
never imported), per review:

1. ``ids = [start_id] + [w + index_from for w in review]``;
2. every id ``>= num_words`` becomes ``oov_id``;
3. keep the *last* ``maxlen`` ids (``truncating='pre'``);
4. pad with 0 to ``maxlen`` before (``padding='pre'``) or after (``padding='post'``).

Unlike ``keras.datasets.imdb.load_data`` nothing is shuffled and no review is dropped
(batches are shuffled per epoch by :func:`rosetta.datasets.batches.iterate_batches`).
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rosetta.datasets.checksums import IMDB_ARCHIVE, Verification, verify_file
from rosetta.datasets.paths import resolve_data_dir
from rosetta.datasets.safe_npz import read_npz
from rosetta.errors import DataError

ARRAYS = ("x_train", "y_train", "x_test", "y_test")
SYNTHETIC_ARRAY = "rosetta_synthetic"
PADDINGS = ("pre", "post")

HOW_TO_GET = IMDB_ARCHIVE.how_to_get
FIX_CORRUPT = IMDB_ARCHIVE.fix_corrupt
OFFICIAL_SIZES = {"train": 25000, "test": 25000}


@dataclass(frozen=True, eq=False)  # arrays: compare fields explicitly
class ImdbData:
    """Preprocessed IMDB: int32 ``x_*`` of shape ``(N, maxlen)`` (batch-major), int32 ``y_*``.

    Use :func:`time_major` for the ``(maxlen, N)`` view an RNN in TNC layout wants.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_words: int
    maxlen: int
    padding: str
    source: str  # "official" | "user-provided" | "synthetic"
    checksum: Verification
    synthetic_info: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def synthetic(self) -> bool:
        """True if the data was made by ``rosetta data synth``."""
        return self.source == "synthetic"


def time_major(x: np.ndarray) -> np.ndarray:
    """``(N, T)`` -> ``(T, N)`` as a C-contiguous *copy* (``np.ascontiguousarray(x.T)``).

    A copy, not a view, so that slicing a batch of columns and handing it to a framework
    needs no further layout change.
    """
    return np.ascontiguousarray(x.T)  # (N, T) -> (T, N)


def archive_path(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of ``imdb.npz`` in the data directory."""
    return resolve_data_dir(data_dir) / IMDB_ARCHIVE.filename


def verify_imdb(path: str | os.PathLike[str]) -> Verification:
    """SHA-256 of the file must be the official one or the one in its synthetic sidecar."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: IMDB not found; {IMDB_ARCHIVE.hint(path.parent)}")
    return verify_file(path, IMDB_ARCHIVE, fix=IMDB_ARCHIVE.fix_hint(path.parent))


def _flatten(x: np.ndarray, src: str) -> tuple[np.ndarray, np.ndarray]:
    """Object array of lists -> (flat int64 ranks, int64 lengths)."""
    if x.dtype != object or x.ndim != 1:
        raise DataError(f"{src}: expected a 1-D object array of word-rank lists; {FIX_CORRUPT}")
    try:
        lengths = np.fromiter((len(r) for r in x), dtype=np.int64, count=x.shape[0])
        total = int(lengths.sum())
        flat = np.fromiter(itertools.chain.from_iterable(x), dtype=np.int64, count=total)
    except (TypeError, ValueError, OverflowError):
        raise DataError(f"{src}: reviews must be lists of integers; {FIX_CORRUPT}") from None
    if flat.size and flat.min() < 0:
        raise DataError(f"{src}: negative word rank; {FIX_CORRUPT}")
    return flat, lengths


def keras_sequences(
    flat: np.ndarray,
    lengths: np.ndarray,
    *,
    num_words: int,
    maxlen: int,
    padding: str,
    start_id: int,
    oov_id: int,
    index_from: int,
) -> np.ndarray:
    """Vectorised Keras preprocessing of concatenated reviews; returns int32 (N, maxlen)."""
    if padding not in PADDINGS:
        raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")
    if maxlen < 1 or num_words < 1:
        raise ValueError("maxlen and num_words must be positive")
    ids = flat + index_from
    ids[ids >= num_words] = oov_id
    start_id = oov_id if start_id >= num_words else start_id
    n = lengths.shape[0]
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)  # (N,)
    seq_len = lengths + 1  # with the start id
    keep = np.minimum(seq_len, maxlen)  # (N,)
    col = np.arange(maxlen, dtype=np.int64)[None, :]  # (1, maxlen)
    if padding == "pre":
        j = col - maxlen + seq_len[:, None]  # position in [start] + review, (N, maxlen)
        valid = col >= (maxlen - keep)[:, None]
    else:
        j = col + (seq_len - keep)[:, None]
        valid = col < keep[:, None]
    token = np.clip(offsets[:, None] + j - 1, 0, max(ids.size - 1, 0))
    gathered = ids[token] if ids.size else np.zeros_like(token)
    out = np.where(j == 0, start_id, gathered)
    out = np.where(valid, out, 0)
    return out.astype(np.int32).reshape(n, maxlen)


def _labels(y: np.ndarray, n: int, src: str) -> np.ndarray:
    if y.ndim != 1 or y.shape[0] != n or not np.issubdtype(y.dtype, np.integer):
        raise DataError(
            f"{src}: expected {n} integer labels, got {y.dtype} {y.shape}; {FIX_CORRUPT}"
        )
    if y.size and (y.min() < 0 or y.max() > 1):
        raise DataError(f"{src}: labels must be 0 or 1; {FIX_CORRUPT}")
    return y.astype(np.int32)


@dataclass(frozen=True, eq=False)
class ImdbArrays:
    """The raw contents of the format: per split the concatenated word ranks with the review
    lengths, and int32 labels (checked: integer ranks >= 0, labels 0/1, one per review)."""

    reviews: dict[str, tuple[np.ndarray, np.ndarray]]  # split -> (flat ranks, lengths)
    labels: dict[str, np.ndarray]
    synthetic_info: dict[str, Any]


def read_imdb_arrays(path: str | os.PathLike[str]) -> ImdbArrays:
    """Read and check the arrays of an ``imdb.npz`` (bounded, safe); the checksum is not checked."""
    path = Path(path)
    arrays = read_npz(path, ARRAYS, fix=FIX_CORRUPT, optional=(SYNTHETIC_ARRAY,))
    info: dict[str, Any] = {}
    if SYNTHETIC_ARRAY in arrays:
        try:
            info = json.loads(str(arrays[SYNTHETIC_ARRAY]))
        except ValueError:
            info = {"raw": str(arrays[SYNTHETIC_ARRAY])}
    reviews, labels = {}, {}
    for split in ("train", "test"):
        flat, lengths = _flatten(arrays[f"x_{split}"], f"{path}:x_{split}")
        reviews[split] = (flat, lengths)
        labels[split] = _labels(arrays[f"y_{split}"], lengths.shape[0], f"{path}:y_{split}")
    return ImdbArrays(reviews, labels, info)


def text_windows(x: np.ndarray, windows: int) -> tuple[np.ndarray, np.ndarray]:
    """Preprocessed reviews (N, maxlen), padded with 0, read as running text: the real ids of
    every review in order, concatenated, cut every ``windows`` ids into windows of
    ``windows + 1``; returns int32 inputs (M, windows), a window's first ``windows`` ids, and
    labels (M, windows), the next id at every position. Every id of the stream but the first
    is a label once; the ids after the last whole window are dropped."""
    if windows < 1:
        raise ValueError(f"windows must be positive, got {windows}")
    stream = x[x != 0]  # row by row, padding dropped: (L,)
    m = max(0, (len(stream) - 1) // windows)
    idx = np.arange(m)[:, None] * windows + np.arange(windows + 1)[None, :]  # (M, windows + 1)
    w = stream[idx].astype(np.int32)
    return w[:, :-1], w[:, 1:]


def load_imdb(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    num_words: int = 30000,
    maxlen: int = 150,
    padding: str = "pre",
    start_id: int = 1,
    oov_id: int = 2,
    index_from: int = 3,
    windows: int = 0,
) -> ImdbData:
    """Load, verify and preprocess ``imdb.npz`` from ``data_dir`` (see module docstring).
    ``windows`` > 0 reads the reviews as text (:func:`text_windows`): ``x_*`` and ``y_*`` are
    then windows of token ids and their next ids, (M, windows) each, for a language model.

    Raises :class:`DataError` (one line naming the file and the fix) if the file is
    missing, fails its checksum, is damaged, lacks arrays or holds unsafe pickles.
    """
    if padding not in PADDINGS:
        raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")
    path = archive_path(data_dir)
    ver = verify_imdb(path)
    raw = read_imdb_arrays(path)
    out: dict[str, np.ndarray] = {}
    for split in ("train", "test"):
        flat, lengths = raw.reviews[split]
        out[f"x_{split}"] = keras_sequences(
            flat,
            lengths,
            num_words=num_words,
            maxlen=maxlen,
            padding=padding,
            start_id=start_id,
            oov_id=oov_id,
            index_from=index_from,
        )
        out[f"y_{split}"] = raw.labels[split]
        if windows:
            out[f"x_{split}"], out[f"y_{split}"] = text_windows(out[f"x_{split}"], windows)
    info = raw.synthetic_info
    return ImdbData(
        **out,
        num_words=num_words,
        maxlen=maxlen,
        padding=padding,
        source=ver.source,
        checksum=ver,
        synthetic_info=info,
    )
