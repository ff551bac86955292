"""Batch iteration and the ResNet-50 inputs (random batches and real image folders)."""

from __future__ import annotations

import types

import numpy as np
import pytest

from rosetta.datasets import (
    iter_image_folder,
    iterate_batches,
    load_image_folder,
    num_batches,
    random_image_batch,
    random_image_batches,
    time_major,
)
from rosetta.errors import DataError


def _xy(n=103):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    return x, np.arange(n, dtype=np.int32)


def test_only_complete_batches_in_order():
    x, y = _xy()
    batches = list(iterate_batches(x, y, 10))
    assert len(batches) == num_batches(103, 10) == 10
    assert all(xb.shape == (10, 2) and yb.shape == (10,) for xb, yb in batches)
    np.testing.assert_array_equal(np.concatenate([yb for _, yb in batches]), np.arange(100))


def test_shuffle_is_deterministic_per_seed_and_epoch():
    x, y = _xy()

    def order(seed, epoch):
        return np.concatenate(
            [yb for _, yb in iterate_batches(x, y, 10, shuffle=True, seed=seed, epoch=epoch)]
        )

    a = order(0, 0)
    np.testing.assert_array_equal(a, order(0, 0))
    assert not np.array_equal(a, order(0, 1)) and not np.array_equal(a, order(1, 0))
    assert len(set(a.tolist())) == 100  # no sample twice in an epoch
    for xb, yb in iterate_batches(x, y, 10, shuffle=True, seed=0, epoch=2):
        np.testing.assert_array_equal(xb[:, 0], yb * 2)  # x and y stay paired


def test_time_major_batches():
    x = np.arange(40 * 5, dtype=np.int32).reshape(40, 5)  # (N, T)
    y = np.arange(40, dtype=np.int32)
    tm = time_major(x)  # (T, N)
    pairs = zip(
        iterate_batches(tm, y, 8, shuffle=True, seed=3, batch_axis=1),
        iterate_batches(x, y, 8, shuffle=True, seed=3),
        strict=True,
    )
    for (xb, yb), (bm, ym) in pairs:
        assert xb.shape == (5, 8) and xb.flags.c_contiguous
        np.testing.assert_array_equal(xb, bm.T)
        np.testing.assert_array_equal(yb, ym)


def test_mismatched_lengths_rejected():
    with pytest.raises(ValueError):
        list(iterate_batches(np.zeros((5, 2)), np.zeros(4), 2))


def test_random_images_match_the_workload():
    gen = random_image_batches()
    assert isinstance(gen, types.GeneratorType)  # never materialises all 1280 images
    first = next(gen)
    assert first.shape == (32, 3, 224, 224) and first.dtype == np.float32
    assert 0.0 <= first.min() and first.max() < 1.0 and first.flags.c_contiguous
    rest = sum(1 for _ in gen)
    assert rest + 1 == 40  # 1280 / 32


def test_random_batches_reproducible_alone_and_in_both_layouts():
    seq = list(random_image_batches(n_images=96, batch_size=32, size=16))
    np.testing.assert_array_equal(seq[2], random_image_batch(2, size=16))
    assert not np.array_equal(seq[0], seq[1])
    nhwc = random_image_batch(2, size=16, layout="NHWC")
    assert nhwc.shape == (32, 16, 16, 3)
    np.testing.assert_array_equal(nhwc.transpose(0, 3, 1, 2), seq[2])
    assert not np.array_equal(random_image_batch(0, seed=1, size=16), seq[0])


def _write_images(folder, sizes):
    from PIL import Image

    folder.mkdir(exist_ok=True)
    for i, (w, h) in enumerate(sizes):
        arr = np.zeros((h, w, 3), np.uint8)
        arr[:] = (200, 10, 10)  # red border region
        cy, cx = h // 2, w // 2
        arr[cy - 40 : cy + 40, cx - 40 : cx + 40] = (10, 200, 10)  # green centre
        ext = "png" if i % 2 else "jpg"
        Image.fromarray(arr).save(folder / f"img{i}.{ext}")


def test_image_folder_resize_and_centre_crop(tmp_path):
    pytest.importorskip("PIL")
    _write_images(tmp_path / "imgs", [(640, 480), (300, 500), (256, 256), (1000, 260)])
    (tmp_path / "imgs" / ".DS_Store").write_bytes(b"junk")  # hidden files are skipped
    x = load_image_folder(tmp_path / "imgs")
    assert x.shape == (4, 3, 224, 224) and x.dtype == np.float32
    assert 0.0 <= x.min() and x.max() <= 1.0
    centre = x[:, :, 112, 112]
    assert (centre[:, 1] > 0.7).all() and (centre[:, 0] < 0.2).all()  # crop is centred
    batches = list(iter_image_folder(tmp_path / "imgs", batch_size=3, layout="NHWC"))
    assert len(batches) == 1 and batches[0].shape == (3, 224, 224, 3)
    np.testing.assert_allclose(batches[0], x[:3].transpose(0, 2, 3, 1))


def test_image_folder_with_non_image_file(tmp_path):
    pytest.importorskip("PIL")
    _write_images(tmp_path / "imgs", [(64, 64)])
    (tmp_path / "imgs" / "notes.txt").write_text("not an image")
    with pytest.raises(DataError) as err:
        next(iter_image_folder(tmp_path / "imgs", batch_size=1))
    msg = str(err.value)
    assert "\n" not in msg and "notes.txt: not an image" in msg and "remove it" in msg


def test_image_folder_missing_or_empty(tmp_path):
    with pytest.raises(DataError, match="image folder not found"):
        load_image_folder(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no image files"):
        load_image_folder(tmp_path / "empty")
