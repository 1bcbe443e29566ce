"""`get_slice(name)[index]` with the reference package's rules: an index is an int, a slice
with a positive step, `...`, a tuple of those, or an empty list; slices are checked against
the shape, never clamped, and errors carry the reference's texts. One extension: negative
slice bounds count from the end (the reference refuses them)."""

import operator

from ..errors import BadSlice


class _Narrow:
    __slots__ = ("start", "stop", "step")

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step

    def __str__(self):
        a = "" if self.start is None else str(self.start)
        b = "" if self.stop is None else str(self.stop)
        return f"{a}:{b}" if self.step == 1 else f"{a}:{b}:{self.step}"


def _resolve(v, shape, dim_idx):
    """A position, negative ones counted from the end of the dimension (ints, and slice
    bounds: an extension, the reference refuses negative bounds)."""
    if v is None:
        return None
    v = operator.index(v)  # a float or str: TypeError, as the reference's
    if v < 0:
        dim = shape[dim_idx] if dim_idx < len(shape) else 0
        if dim + v < 0:
            raise BadSlice(f"Invalid index {v} for dimension {dim_idx} of size {dim}")
        v += dim
    return v


def parse(index, shape):
    """The index as a list of ints (selected positions) and `_Narrow`s, one per leading
    dimension; negative ints resolved."""
    if isinstance(index, tuple):
        items = list(index)
    elif isinstance(index, list):
        if not index:
            return [_Narrow(0, 0, 1)]
        raise BadSlice("Non empty lists are not implemented")
    else:
        items = [index]
    n_ellipsis = sum(1 for it in items if it is Ellipsis)
    if n_ellipsis > 1:
        raise BadSlice("Only one ellipsis (...) is allowed in slice index")
    expand = max(len(shape) - (len(items) - n_ellipsis), 0)
    out = []
    for it in items:
        dim_idx = len(out)
        if it is Ellipsis:
            out.extend(_Narrow(None, None, 1) for _ in range(expand))
        elif isinstance(it, slice):
            start, stop = _resolve(it.start, shape, dim_idx), _resolve(it.stop, shape, dim_idx)
            step = 1 if it.step is None else operator.index(it.step)
            if step <= 0:
                raise BadSlice(f"Slice step must be a positive integer, got {step}")
            out.append(_Narrow(start, stop, step))
        elif hasattr(it, "__index__") and not isinstance(it, (list, tuple)):
            out.append(_resolve(it, shape, dim_idx))
        else:
            raise BadSlice(f"Unsupported slice index at position {dim_idx}: "
                           "expected slice, int, or ellipsis")
    return out


def _fail(indexers, shape, why):
    shown = ", ".join(str(i) for i in indexers)
    return BadSlice(f"Error during slicing [{shown}] with shape {list(shape)}: {why}")


def to_numpy_index(indexers, shape):
    """The checked NumPy index of parsed indexers (ints and slices)."""
    if len(indexers) > len(shape):
        raise _fail(indexers, shape, "more slicing indexes than dimensions in tensor")
    out = []
    for dim_index, (ix, dim) in enumerate(zip(indexers, shape)):
        if isinstance(ix, int):
            start, stop = ix, ix + 1
        else:
            start = 0 if ix.start is None else ix.start
            stop = dim if ix.stop is None else ix.stop
        if start >= dim or stop > dim:
            if not (isinstance(ix, _Narrow) and start == stop == 0):
                asked = start if start >= dim else stop - 1
                raise _fail(indexers, shape, f"index {asked} out of bounds for tensor "
                                             f"dimension #{dim_index} of size {dim}")
        out.append(ix if isinstance(ix, int) else slice(start, max(stop, start), ix.step))
    return tuple(out)


def positions(index):
    """A dataset index (`ds[i]`) as an int, or as a list of ints for an index list (a list,
    tuple, 1-D NumPy array or tensor of integers, as torch's datasets take); a TypeError
    saying what is accepted for anything else (floats, bools, strings of a batch dataset)."""
    try:
        i = operator.index(index)
    except TypeError:
        items = index.tolist() if hasattr(index, "tolist") else index
        if isinstance(items, (list, tuple)) and all(
                isinstance(v, int) and not isinstance(v, bool) for v in items):
            return list(items)
    else:
        if not isinstance(index, bool) and "bool" not in str(getattr(index, "dtype", "")):
            return i
    raise TypeError(f"dataset indices are integers, slices or lists of integers, not "
                    f"{type(index).__name__} ({index!r})")
