"""Inputs for the ResNet-50 feature-extraction workload.

Random images (the original benchmark's input): 1,280 images of 224x224x3, float32 uniform
in [0, 1), in batches of 32. Batch ``i`` is drawn from ``np.random.default_rng([seed, i])``
as an NHWC block ``(batch, 224, 224, 3)`` and transposed for NCHW, so:

- any batch can be regenerated alone (no need to replay batches 0..i-1);
- the whole set is never in memory at once (one batch is 19 MB);
- NCHW and NHWC hold the same pixel values.

Real images: :func:`iter_image_folder` reads every JPEG/PNG (anything PIL opens) of a
folder in sorted name order, converts to RGB, resizes the *shorter side to 256* (bilinear)
and centre-crops 224x224 - the usual ImageNet evaluation transform - and scales to [0, 1].
No mean/std normalisation is applied here (the random input has none either). Hidden files
(names starting with ".") are skipped; any other file that is not an image is an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from rosetta.errors import DataError

N_IMAGES = 1280
BATCH_SIZE = 32
IMAGE_SIZE = 224
RESIZE_TO = 256
LAYOUTS = ("NCHW", "NHWC")


def _layout(x_nhwc: np.ndarray, layout: str) -> np.ndarray:
    if layout == "NHWC":
        return x_nhwc
    if layout == "NCHW":
        return np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))  # (N, H, W, C) -> (N, C, H, W)
    raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def random_image_batch(
    index: int,
    *,
    batch_size: int = BATCH_SIZE,
    seed: int = 0,
    layout: str = "NCHW",
    size: int = IMAGE_SIZE,
) -> np.ndarray:
    """Batch ``index`` of the random images: float32 in [0, 1), (B, 3, S, S) or (B, S, S, 3)."""
    rng = np.random.default_rng([seed, index])
    x = rng.random((batch_size, size, size, 3), dtype=np.float32)  # NHWC
    return _layout(x, layout)


def random_image_batches(
    n_images: int = N_IMAGES,
    batch_size: int = BATCH_SIZE,
    *,
    seed: int = 0,
    layout: str = "NCHW",
    size: int = IMAGE_SIZE,
) -> Iterator[np.ndarray]:
    """Yield the ``n_images // batch_size`` complete random batches, one at a time."""
    for i in range(n_images // batch_size):
        yield random_image_batch(i, batch_size=batch_size, seed=seed, layout=layout, size=size)


def list_images(folder: str | os.PathLike[str]) -> list[Path]:
    """Sorted regular, non-hidden files of ``folder`` (each must turn out to be an image)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder}: image folder not found; pass a folder of JPEG/PNG files")
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise DataError(f"{folder}: no image files; put JPEG/PNG images in it")
    return files


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise DataError(
            "reading real images needs Pillow; install it with `pip install pillow` "
            "(or the rosetta[images] extra)"
        ) from None
    return Image


def load_image(
    path: str | os.PathLike[str], *, size: int = IMAGE_SIZE, resize: int = RESIZE_TO
) -> np.ndarray:
    """One image as float32 HWC ``(size, size, 3)`` in [0, 1]: shorter side to ``resize``,
    centre crop ``size``. Raises DataError naming the file if it is not a readable image."""
    image_mod = _pil()
    path = Path(path)
    try:
        with image_mod.open(path) as im:
            im = im.convert("RGB")
            w, h = im.size
            scale = resize / min(w, h)
            nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
            im = im.resize((nw, nh), image_mod.BILINEAR)
            left, top = (nw - size) // 2, (nh - size) // 2
            im = im.crop((left, top, left + size, top + size))
            arr = np.asarray(im, dtype=np.uint8)
    except (OSError, ValueError, SyntaxError) as exc:  # PIL's UnidentifiedImageError is OSError
        raise DataError(
            f"{path}: not a readable image ({type(exc).__name__}); remove it from the folder "
            "or convert it to JPEG/PNG"
        ) from None
    return arr.astype(np.float32) / np.float32(255.0)


def iter_image_folder(
    folder: str | os.PathLike[str],
    batch_size: int = BATCH_SIZE,
    *,
    layout: str = "NCHW",
    size: int = IMAGE_SIZE,
    resize: int = RESIZE_TO,
) -> Iterator[np.ndarray]:
    """Yield complete batches of the folder's images (see module docstring), in order.

    Every file is checked before the first batch is yielded, so a stray non-image file is
    reported up front rather than after minutes of benchmarking.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    files = list_images(folder)
    image_mod = _pil()
    for p in files:
        try:
            with image_mod.open(p) as im:
                im.verify()
        except Exception:  # noqa: BLE001 - any failure means "not an image"
            raise DataError(
                f"{p}: not an image; remove it from the folder or convert it to JPEG/PNG"
            ) from None
    for b in range(len(files) // batch_size):
        chunk = files[b * batch_size : (b + 1) * batch_size]
        x = np.stack([load_image(p, size=size, resize=resize) for p in chunk])  # (B, S, S, 3)
        yield _layout(x, layout)


def load_image_folder(
    folder: str | os.PathLike[str],
    *,
    layout: str = "NCHW",
    size: int = IMAGE_SIZE,
    resize: int = RESIZE_TO,
) -> np.ndarray:
    """All images of a folder as one float32 array (N, 3, S, S) or (N, S, S, 3)."""
    files = list_images(folder)
    return next(iter_image_folder(folder, len(files), layout=layout, size=size, resize=resize))
