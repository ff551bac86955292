"""Synthetic CIFAR-10 in the exact official on-disk format (``cifar-10-python.tar.gz``).

How an image of class ``c`` is made (all in a 0..255 pixel scale):

    pixel = 128 + 24 * (a * T_c[crop at random shift] + colour_c + jitter) + noise

- ``T_c`` is a smooth 3x40x40 class template (two oriented low-frequency gratings with
  per-channel weights plus a coloured Gaussian blob), normalised to unit variance; each
  image takes a random 32x32 crop of it (a shift of up to +-4 px in each direction);
- ``colour_c`` is a class mean colour (3 values, sd 0.4), ``jitter`` a per-image colour
  offset (sd 1) and ``a`` a per-image contrast in [0.5, 1.5];
- ``noise`` is i.i.d. Gaussian per pixel (sd 48, twice the template's sd), so no single
  pixel separates the classes, but the structure summed over the image does;
- then what real photographs have: black borders on 8% of the images and flat regions (a
  quarter to a half of the image in one colour, white or black for half of them) on 15%
  (``_real_structure``): the exact zeros, ties and saturated patches where backends' ReLU and
  max-pool conventions show, and which the equivalence gate picks its batch for.

Sized so that the spec's own CNN (pixels in [0, 1], SGD lr 0.01, momentum 0.9, batch 64)
leaves chance within its ``smoke`` profile: measured with a PyTorch copy of the network on
2,048 training images, test accuracy 0.37 after 32 steps, 0.87 after 64 and 0.97 after 128
(with template sd 8 and noise sd 64 it was still at chance after 64 steps: the [0, 1] inputs
carried too little signal for plain SGD).

Batch ``k`` of the archive is generated from ``np.random.default_rng([seed, STREAM, k])``
and the templates from ``default_rng([seed, STREAM])``, so files are identical for a seed.
The tar and gzip headers carry fixed times/owners: same seed, same bytes, same MD5 (for a
given NumPy/zlib build).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path

import numpy as np

from rosetta.datasets.checksums import (
    CIFAR10_ARCHIVE,
    CIFAR10_FOLDER,
    bytes_digest,
    remove_sidecar,
    write_sidecar,
)
from rosetta.datasets.cifar10 import (
    BATCH_IMAGES,
    LABEL_NAMES,
    META_FILE,
    SYNTHETIC_KEY,
    TEST_FILE,
    TRAIN_FILES,
)
from rosetta.datasets.paths import atomic_write, ensure_writable_dir, resolve_data_dir
from rosetta.datasets.py2pickle import dumps_py2
from rosetta.errors import DataError

GENERATOR_VERSION = 3  # 3: black borders and flat (white, black, coloured) regions
_STREAM = 0xC1FA10
_PAD = 4  # maximum shift in pixels
_T = 32 + 2 * _PAD  # template side
_AMPLITUDE = 24.0  # template sd in pixel units
_COLOUR = 0.8  # weight of the class mean colour
_NOISE = 48.0  # per-pixel noise sd in pixel units
_BORDER = 0.08  # fraction of images with a black border
_FLAT = 0.15  # fraction of images with a flat region
_CHUNK = 5000  # images generated at once (bounds memory to ~100 MB)
_FIXED_MTIME = 1262304000  # 2010-01-01, a fixed date for reproducible archives


def class_templates(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The per-class templates ``(10, 3, 40, 40)`` float32 and mean colours ``(10, 3)``."""
    rng = np.random.default_rng([seed, _STREAM])
    yy, xx = np.mgrid[0:_T, 0:_T].astype(np.float32) / _T  # (40, 40) each, in [0, 1)
    templates = np.empty((10, 3, _T, _T), np.float32)
    for c in range(10):
        t = np.zeros((3, _T, _T), np.float32)
        for _ in range(2):
            theta = rng.uniform(0, np.pi)
            freq = rng.uniform(1.0, 3.0)
            phase = rng.uniform(0, 2 * np.pi)
            wave = np.sin(2 * np.pi * freq * (np.cos(theta) * xx + np.sin(theta) * yy) + phase)
            t += rng.normal(0, 1, size=(3, 1, 1)).astype(np.float32) * wave
        cy, cx = rng.uniform(0.3, 0.7, size=2)
        blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * 0.12**2))
        t += 1.5 * rng.normal(0, 1, size=(3, 1, 1)).astype(np.float32) * blob
        t -= t.mean()
        templates[c] = t / t.std()
    colours = rng.normal(0, 0.5, size=(10, 3)).astype(np.float32)
    return templates, colours


def synth_images(
    labels: np.ndarray, rng: np.random.Generator, templates: np.ndarray, colours: np.ndarray
) -> np.ndarray:
    """uint8 ``(n, 3072)`` images (R, G, B planes row-major) for the given labels."""
    n = labels.shape[0]
    # all 9x9 shifted 32x32 windows of every template: (10, 3, 9, 9, 32, 32), a view
    windows = np.lib.stride_tricks.sliding_window_view(templates, (32, 32), axis=(2, 3))
    oy = rng.integers(0, 2 * _PAD + 1, size=n)
    ox = rng.integers(0, 2 * _PAD + 1, size=n)
    x = windows[labels, :, oy, ox]  # (n, 3, 32, 32)
    contrast = rng.uniform(0.5, 1.5, size=(n, 1, 1, 1)).astype(np.float32)
    jitter = rng.normal(0, 1.0, size=(n, 3, 1, 1)).astype(np.float32)
    x *= contrast
    x += np.float32(_COLOUR) * colours[labels][:, :, None, None] + jitter
    x *= np.float32(_AMPLITUDE)
    x += np.float32(128.0)
    x += rng.standard_normal(size=x.shape, dtype=np.float32) * np.float32(_NOISE)
    np.clip(x, 0, 255, out=x)
    _real_structure(x, rng)
    return np.rint(x).astype(np.uint8).reshape(n, 3072)  # (n, 3, 32, 32) -> (n, 3072)


def _real_structure(x: np.ndarray, rng: np.random.Generator) -> None:
    """What real photographs have and noise does not, in place on ``(n, 3, 32, 32)`` pixels:

    - a black border (letterboxing, padding), 1-3 px, on ``_BORDER`` of the images: with the
      canonical zero biases a conv's pre-activation there is exactly 0;
    - a flat region (sky, wall, studio background) of one colour over a quarter to a half of the
      image on ``_FLAT`` of them: max-pool windows there hold tied maxima; a third of those
      regions are white (255) and a sixth black, so saturated and zero pixels come in patches,
      as in real over- and under-exposed photos, besides the clipping of the noise.
    """
    n = len(x)
    border = np.flatnonzero(rng.random(n) < _BORDER)
    widths = rng.integers(1, 4, size=len(border))
    for i, w in zip(border, widths, strict=True):
        x[i, :, :w, :] = 0
        x[i, :, -w:, :] = 0
        x[i, :, :, :w] = 0
        x[i, :, :, -w:] = 0
    flat = np.flatnonzero(rng.random(n) < _FLAT)
    sides = rng.integers(0, 4, size=len(flat))
    depth = rng.integers(8, 17, size=len(flat))  # 8-16 of 32 rows or columns
    kind = rng.random(len(flat))
    colour = rng.uniform(40, 215, size=(len(flat), 3)).astype(np.float32)
    colour[kind < 1 / 3] = 255.0
    colour[(kind >= 1 / 3) & (kind < 1 / 2)] = 0.0
    for i, side, d, c in zip(flat, sides, depth, colour, strict=True):
        region = (
            (slice(None), slice(0, d), slice(None)),  # top
            (slice(None), slice(32 - d, 32), slice(None)),  # bottom
            (slice(None), slice(None), slice(0, d)),  # left
            (slice(None), slice(None), slice(32 - d, 32)),  # right
        )[side]
        x[i][region] = c[:, None, None]


def _batch_dict(
    seed: int, index: int, n: int, label: str, templates: np.ndarray, colours: np.ndarray
) -> dict[bytes, object]:
    rng = np.random.default_rng([seed, _STREAM, index])
    labels = rng.permutation(np.arange(n) % 10)  # balanced classes, shuffled
    chunks = [
        synth_images(labels[i : i + _CHUNK], rng, templates, colours) for i in range(0, n, _CHUNK)
    ]
    data = np.concatenate(chunks)  # (n, 3072)
    names = [
        f"rosetta_synthetic_{LABEL_NAMES[y]}_b{index}_{i:05d}.png".encode()
        for i, y in enumerate(labels.tolist())
    ]
    return {
        b"batch_label": label.encode(),
        b"labels": labels.tolist(),
        b"data": data,
        b"filenames": names,
    }


def _add(tf: tarfile.TarFile, name: str, payload: bytes | None) -> None:
    info = tarfile.TarInfo(name)
    info.mtime = _FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if payload is None:
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tf.addfile(info)
    else:
        info.mode = 0o644
        info.size = len(payload)
        tf.addfile(info, io.BytesIO(payload))


def write_synthetic_cifar10(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    seed: int = 0,
    n_train: int = 50000,
    n_test: int = 10000,
) -> Path:
    """Write a synthetic ``cifar-10-python.tar.gz`` (official layout) and its sidecar.

    ``n_train`` must be a multiple of 5 (five equal training batches). Overwrites any
    existing archive (the CLI asks for ``--force`` first). Returns the archive path.
    """
    if (
        n_train < 5
        or n_train % 5
        or n_test < 1
        or n_train > 5 * BATCH_IMAGES
        or n_test > BATCH_IMAGES
    ):
        raise DataError(
            f"synthetic CIFAR-10 sizes n_train={n_train}, n_test={n_test}: n_train must be a "
            f"positive multiple of 5 up to {5 * BATCH_IMAGES} and n_test from 1 to "
            f"{BATCH_IMAGES} (the official format's batch size); pass other "
            "--cifar-train/--cifar-test"
        )
    data_dir = ensure_writable_dir(resolve_data_dir(data_dir))
    target = data_dir / CIFAR10_ARCHIVE.filename
    templates, colours = class_templates(seed)
    info = {
        "dataset": "cifar10",
        "seed": seed,
        "n_train": n_train,
        "n_test": n_test,
        "generator_version": GENERATOR_VERSION,
    }
    per = n_train // 5
    members: dict[str, str] = {}
    remove_sidecar(target)  # a stale sidecar must never vouch for the new bytes
    with atomic_write(target) as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tf:
                _add(tf, CIFAR10_FOLDER, None)
                meta = {
                    b"num_cases_per_batch": per,
                    b"label_names": [n.encode() for n in LABEL_NAMES],
                    b"num_vis": 3072,
                    SYNTHETIC_KEY: {k.encode(): v for k, v in info.items()},
                }
                for b, name in enumerate(TRAIN_FILES, start=1):
                    batch = _batch_dict(
                        seed, b, per, f"training batch {b} of 5", templates, colours
                    )
                    _add_and_record(tf, name, dumps_py2(batch), members)
                test = _batch_dict(seed, 0, n_test, "testing batch 1 of 1", templates, colours)
                _add_and_record(tf, TEST_FILE, dumps_py2(test), members)
                _add_and_record(tf, META_FILE, dumps_py2(meta), members)
                readme = b"<html><body>Synthetic CIFAR-10 written by rosetta data synth: "
                readme += json.dumps(info, sort_keys=True).encode() + b"</body></html>\n"
                _add(tf, f"{CIFAR10_FOLDER}/readme.html", readme)
    write_sidecar(target, {"sizes": {"train": n_train, "test": n_test}, "members": members, **info})
    return target


def _add_and_record(
    tf: tarfile.TarFile, name: str, payload: bytes, members: dict[str, str]
) -> None:
    members[name] = bytes_digest(payload, "md5")
    _add(tf, f"{CIFAR10_FOLDER}/{name}", payload)
