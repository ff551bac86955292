"""avgpool2d in Keras: ``layers.AveragePooling2D``, which has no explicit padding and whose
"same" padding leaves padded cells out of each window's divisor. So: no padding, a "valid" pool;
padded zeros counted (``count_include_pad``), a ``ZeroPadding2D`` before a "valid" pool;
real-cell averages, ``padding="same"`` where it pads exactly the spec's numbers *and*
symmetrically (Keras on PyTorch pads an asymmetric "same" by replicating the edge, which would
count as real cells), else the division written out: the zero-padded input's average over
that of zero-padded ones (the windows' real-cell fractions; ``kh * kw`` cancels). No parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rosetta.backends.driver import Site
from rosetta.backends.keras_common.ops import nhwc_shape, pair
from rosetta.backends.snippet import RenderCtx, Snippet
from rosetta.spec import ops

if TYPE_CHECKING:  # the framework is imported by build() alone
    from rosetta.backends.keras_common.lowering import Ctx, Layer

#: the function the generated file calls for real-cell averages Keras' "same" does not give
REAL_CELL_AVERAGE = '''
def real_cell_average(x, pool_size, strides, padding):
    """Average pooling over the zero ``padding`` ((top, bottom), (left, right)), each window
    divided by its real cells: the padded input's average over that of padded ones."""
    pad, pool = layers.ZeroPadding2D(padding), layers.AveragePooling2D(pool_size, strides)
    return pool(pad(x)) / pool(pad(keras.ops.ones_like(x)))
'''
HELPERS = {"real_cell_average": REAL_CELL_AVERAGE}


def _same(op: ops.AvgPool2D, site: Site) -> bool:
    """Whether Keras' "same" is the spec's real-cell average: padding symmetric and exactly what
    "same" pads (``lowering.same_is_exact``'s rule, here without importing Keras: the text face
    loads with NumPy alone)."""
    if op.count_include_pad or not any(op.padding):
        return False
    pads = []
    for k, s, n in zip(op.kernel, op.stride, site.in_shape[1:], strict=True):
        total = max((-(-n // s) - 1) * s + k - n, 0)  # ceil(n / s) outputs
        pads += [total // 2, total - total // 2]  # the odd cell at the end
    t, b, left, right = op.padding
    return tuple(pads) == tuple(op.padding) and t == b and left == right


def build(op: ops.AvgPool2D, site: Site, ctx: Ctx) -> Layer:
    import keras
    from keras import layers

    from rosetta.backends.keras_common.lowering import after

    same = _same(op, site)
    pool = layers.AveragePooling2D(
        op.kernel,
        strides=op.stride,
        padding="same" if same else "valid",
        data_format=ctx.data_format,
        dtype=ctx.dtype,
    )
    if same or not any(op.padding):
        return pool
    t, b, left, right = op.padding
    pad = layers.ZeroPadding2D(((t, b), (left, right)), ctx.data_format, dtype=ctx.dtype)
    if op.count_include_pad:
        return after(pad, pool)  # padded zeros counted: every window divided by kh * kw
    return lambda x: pool(pad(x)) / pool(pad(keras.ops.ones_like(x)))  # over the real cells


def render(op: ops.AvgPool2D, site: Site, ctx: RenderCtx) -> Snippet:
    t, b, left, right = op.padding
    shape = nhwc_shape(site.out_shape)
    if any(op.padding) and not op.count_include_pad and not _same(op, site):
        line = (
            f"{{x}} = real_cell_average({{x}}, {pair(op.kernel)}, {pair(op.stride)}, "
            f"(({t}, {b}), ({left}, {right})))  # {shape}"
        )
        return Snippet(forward=(line,), helpers=("real_cell_average",))
    forward = []
    args = [pair(op.kernel)]
    if op.stride != op.kernel:
        args.append(f"strides={pair(op.stride)}")
    if _same(op, site):
        args.append('padding="same"')  # padded cells left out of the divisor
    elif any(op.padding):
        forward.append(f"{{x}} = layers.ZeroPadding2D((({t}, {b}), ({left}, {right})))({{x}})")
    forward.append(f"{{x}} = layers.AveragePooling2D({', '.join(args)})({{x}})  # {shape}")
    return Snippet(forward=tuple(forward))
