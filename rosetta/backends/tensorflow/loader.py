"""The native loader: ``tf.data`` over the shared arrays, in the runner's order, complete batches.

A dataset of index batches (``order`` cut into complete batches) is mapped to ``tf.gather`` of
the samples, converted to the model's layout (NCHW -> NHWC on CPU) and dtype inside the
pipeline, and prefetched (``AUTOTUNE``); on a GPU the batches are also prefetched to the device.
The arrays become TensorFlow tensors once and are reused while the runner passes the same ones
(every epoch).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


class TFLoader:
    """Builds the ``tf.data`` pipeline of one model (its layout, dtype and device)."""

    def __init__(self, *, image_dtype: str, channels_last: bool, tf_device: str):
        self.image_dtype = image_dtype
        self.channels_last = channels_last
        self.tf_device = tf_device
        self._cache: dict[str, tuple[np.ndarray, tf.Tensor]] = {}

    def _tensor(self, key: str, a: np.ndarray) -> tf.Tensor:
        held = self._cache.get(key)
        if held is None or held[0] is not a:
            with tf.device("/CPU:0"):
                held = self._cache[key] = (a, tf.constant(a))
        return held[1]

    def convert(self, xb: tf.Tensor, x: np.ndarray) -> tf.Tensor:
        """Samples of ``x`` in the model's layout and dtype: images (and a cut's float
        activations) cast, images NCHW -> NHWC where the model is channels-last, ids int32."""
        if x.ndim == 4:
            xb = tf.cast(xb, self.image_dtype)
            if self.channels_last:
                xb = tf.transpose(xb, (0, 2, 3, 1))  # (N, C, H, W) -> (N, H, W, C)
            return xb
        if not np.issubdtype(x.dtype, np.integer):
            return tf.cast(xb, self.image_dtype)  # the localiser's cut: (N, F) or (N, T, E)
        return tf.cast(xb, tf.int32)  # token ids, as the model's input signature says

    def batch(self, x: np.ndarray) -> tuple[tf.Tensor]:
        """One request's batch, converted directly (no pipeline): what a server does with it.
        A ``tf.data`` pipeline per request cost ~25 ms (the transformer at batch 1: p90 28.7 ms
        through the pipeline where torch took 1.9 ms)."""
        with tf.device("/CPU:0"):
            return (self.convert(tf.constant(x), x),)

    def dataset(self, x: np.ndarray, y: np.ndarray | None, order: np.ndarray, batch_size: int):
        """Native batches ``(x, y)`` or ``(x,)`` of ``x[order]``, complete batches only."""
        n = len(order) // batch_size * batch_size
        xs = self._tensor("x", x)
        ys = None if y is None else self._tensor("y", np.asarray(y, dtype=np.int64))

        def take(idx):
            xb = self.convert(tf.gather(xs, idx), x)
            return (xb,) if ys is None else (xb, tf.gather(ys, idx))

        with tf.device("/CPU:0"):
            idx = tf.data.Dataset.from_tensor_slices(np.asarray(order[:n], dtype=np.int64))
            ds = idx.batch(batch_size, drop_remainder=True)
            ds = ds.map(take, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            ds = ds.prefetch(tf.data.AUTOTUNE)
        if self.tf_device.startswith("/GPU"):
            ds = ds.apply(tf.data.experimental.prefetch_to_device(self.tf_device))
        return ds

    def to_numpy(self, batch) -> tuple[np.ndarray, ...]:
        """A native batch back in canonical layout."""
        x = batch[0].numpy()
        if x.ndim == 4 and self.channels_last:
            x = x.transpose(0, 3, 1, 2)  # (N, H, W, C) -> (N, C, H, W)
        return (x, *(b.numpy() for b in batch[1:]))
