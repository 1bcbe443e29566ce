"""The part of a tensor a rank keeps, as the native per-rank plan reads it: a *cut* (one
`(start, stop)` range per leading dimension, later dimensions whole) plus what is left to do
in memory (`post`: ints that drop a dimension, steps), from

- a plan entry of `load_sharded` (None: the whole tensor; `(dim, start, stop)`: one
  dimension cut; or any `get_slice` index: an int, a slice, or a tuple of ints, slices and
  `...` holding at least one slice or `...`; a tuple of three ints is `(dim, start, stop)`);
- a `get_slice(name)[index]` index, under NumPy's rules (checked, never clamped) or torch's
  (clamped to the shape, as the reference gives torch tensors).

Only the cut's bytes are read (see `tensorsmith::rank_plan` for the spans and the coalescing
rule); `post` then works on the part alone.
"""

import operator

from . import slicing as _slicing
from ..errors import BadSlice

# Dtypes that pack several values per byte: their parts are planned in whole bytes only.
PACKED = {"F4", "F6_E2M3", "F6_E3M2", "I4", "I2", "U4", "U2"}


class Part:
    """`cut` (list of (start, stop)), `shape` (the cut's shape, whole dimensions included)
    and `post` (an index applied to the part read, or None)."""

    __slots__ = ("cut", "shape", "post")

    def __init__(self, cut, shape, post=None):
        self.cut, self.shape, self.post = cut, shape, post


def _whole(shape):
    return Part([], list(shape))


def from_indexers(indexers, shape):
    """A Part of checked NumPy-style indexers (ints, `slice(start, stop, step)` with
    start <= stop inside the shape)."""
    cut, post = [], []
    for ix in indexers:
        if isinstance(ix, int):
            cut.append((ix, ix + 1))
            post.append(0)
        else:
            cut.append((ix.start, ix.stop))
            post.append(slice(None, None, ix.step))
    part_shape = [b - a for a, b in cut] + list(shape[len(cut):])
    trivial = all(isinstance(p, slice) and p.step == 1 for p in post)
    return Part(cut, part_shape, None if trivial else tuple(post))


def numpy_index(index, shape):
    """The Part of a `get_slice` index under the reference's NumPy rules (its errors)."""
    return from_indexers(_slicing.to_numpy_index(_slicing.parse(index, shape), shape), shape)


def torch_index(index, shape):
    """The Part of a `get_slice` index under torch's rules (slices clamped, negative ints
    from the end), or None for an index torch would take some other way (None, lists,
    masks, tensors, out-of-range ints, steps below 1): those are left to torch on the whole
    tensor, so its own results and errors stand."""
    items = list(index) if isinstance(index, tuple) else [index]
    if sum(1 for it in items if it is Ellipsis) > 1:
        return None
    n = sum(1 for it in items if it is not Ellipsis)
    if n > len(shape):
        return None
    out = []
    for it in items:
        dim = len(out)
        if it is Ellipsis:
            out.extend(slice(0, shape[dim + k], 1) for k in range(len(shape) - n))
        elif isinstance(it, slice):
            try:
                start, stop, step = it.indices(shape[dim])
            except (TypeError, ValueError):
                return None
            if step < 1:
                return None
            out.append(slice(start, max(start, stop), step))
        elif isinstance(it, int) and not isinstance(it, bool):
            i = it + shape[dim] if it < 0 else it
            if not 0 <= i < shape[dim]:
                return None
            out.append(i)
        else:
            return None
    return from_indexers(out, shape)


def _int(v, what):
    try:
        if isinstance(v, bool):
            raise TypeError
        return operator.index(v)
    except TypeError:
        raise BadSlice(f"{what} must be an int, not {type(v).__name__}") from None


def plan_entry(name, spec, shape):
    """The Part of a `load_sharded` plan entry for tensor `name` of `shape`; a bad entry's
    error names the tensor."""
    if spec is None or spec is Ellipsis:
        return _whole(shape)
    is_index = (isinstance(spec, (slice, int)) and not isinstance(spec, bool)) or (
        isinstance(spec, tuple) and any(isinstance(v, slice) or v is Ellipsis for v in spec))
    if is_index:
        try:
            return numpy_index(spec, shape)
        except (BadSlice, TypeError) as e:
            raise BadSlice(f"plan entry for {name!r}: {e}") from None
    if not (isinstance(spec, (tuple, list)) and len(spec) == 3):
        raise BadSlice(f"plan entry for {name!r}: expected None, (dim, start, stop) or a "
                       f"get_slice index (slices, ints, ...), not {spec!r}")
    dim, start, stop = (_int(v, f"plan entry for {name!r}: dim, start and stop")
                        for v in spec)
    if not 0 <= dim < len(shape):
        raise BadSlice(f"plan entry for {name!r}: dimension {dim} of a tensor of shape "
                       f"{list(shape)}")
    if not 0 <= start <= stop <= shape[dim]:
        raise BadSlice(f"plan entry for {name!r}: {start}:{stop} is not inside dimension "
                       f"{dim} of size {shape[dim]}")
    cut = [(0, d) for d in shape[:dim]] + [(start, stop)]
    part_shape = list(shape)
    part_shape[dim] = stop - start
    return Part(cut, part_shape)
