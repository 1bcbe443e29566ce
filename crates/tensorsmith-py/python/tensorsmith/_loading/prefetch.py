"""`safe_open(..., framework="pt").prefetch(plan)`: safetensors 0.9's per-rank prefetch API
(`PrefetchPlan`, `PrefetchLoader`), so code written for it runs on tensorsmith unchanged.

A plan is 0.9's `Dict[str, Optional[slice]]`: None for a whole tensor, or a step-1 slice of
its first dimension (Python's slice rules: bounds clamped to the dimension, negative ones
from its end). The load runs in a background thread through `load_sharded`'s reads (only
the planned spans; onto CUDA through the pinned ring); each tensor is handed out once, by
`take` or by iterating. Two differences, both wider than 0.9: any torch device is taken
(0.9 loads to CUDA only), and tensors are handed out once the whole plan has landed (0.9
hands each out as it lands; the order of iteration is unspecified in both).
"""

import threading

from . import sharded as _sharded
from .. import _torch
from ..errors import InvalidInput, TensorNotFound


def _checked_plan(native, plan):
    """`plan` as `load_sharded` takes it (name -> None or (0, start, stop)), in file order,
    with 0.9's refusals: steps other than 1, a slice of a 0-d tensor, names not in the file,
    dtypes torch has none for."""
    names = native.names()
    if plan is None:
        plan = dict.fromkeys(names)
    if not isinstance(plan, dict):
        raise InvalidInput(f"plan must be a dict of tensor name -> None or a slice, not "
                           f"{type(plan).__name__}")
    _sharded._owners([native], list(plan))  # a name not in the file: TensorNotFound
    out = {}
    order = {n: i for i, n in enumerate(names)}
    for n in sorted(plan, key=order.__getitem__):
        s = plan[n]
        dtype, shape, _ = native.info_of(n)
        _torch.torch_dtype(dtype)  # F6 and the like: refused before loading
        if s is None:
            out[n] = None
            continue
        if not isinstance(s, slice):
            raise InvalidInput(f"prefetch plan entry for {n!r}: None or a slice of the first "
                               f"dimension, not {s!r}")
        if s.step not in (None, 1):
            raise InvalidInput(f"prefetch plan entry for {n!r}: a slice's step must be 1, "
                               f"not {s.step!r}")
        if not shape:
            raise InvalidInput(f"prefetch plan entry for {n!r}: a 0-d tensor cannot be sliced")
        start, stop, _ = s.indices(shape[0])
        out[n] = (0, start, max(start, stop))
    return out


class PrefetchLoader:
    """The planned tensors of one file loading in the background (safetensors 0.9's
    `PrefetchLoader`): `take(name)`, or iterate `(name, tensor)` pairs; each tensor once."""

    def __init__(self, native, plan, device, threads):
        self._plan = _checked_plan(native, plan)
        self._names = list(self._plan)
        self._taken = set()
        self._out, self._error = None, None
        self._closed = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(native, device, threads),
                                        name="tensorsmith-prefetch", daemon=True)
        self._thread.start()

    def _run(self, native, device, threads):
        try:
            self._out = _sharded.load([native], self._plan, device, workers=threads)
        except BaseException as e:  # handed to the taker
            self._error = e
        finally:
            self._done.set()

    def _wait(self):
        self._done.wait()
        if self._error is not None:
            raise self._error

    def names(self):
        """The names this loader hands out, in file order."""
        return list(self._names)

    def __len__(self):
        return len(self._names)

    def take(self, name):
        """`name`'s tensor, waiting for it to land; each tensor is taken once."""
        if self._closed:
            raise InvalidInput("the prefetch loader is closed")
        if name not in self._plan:
            raise TensorNotFound(f"{name!r} is not in this prefetch plan")
        if name in self._taken:
            raise InvalidInput(f"{name!r} was already taken from this prefetch loader")
        self._wait()
        self._taken.add(name)
        return self._out.pop(name)

    def __iter__(self):
        """`(name, tensor)` pairs not taken yet."""
        for n in self._names:
            if n not in self._taken and not self._closed:
                yield n, self.take(n)

    def close(self):
        """Waits for the load to stop and drops the tensors not taken; those handed out
        keep their memory."""
        self._thread.join()
        self._closed = True
        self._out = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def prefetch(native, plan, device, threads):
    """A started `PrefetchLoader` onto `device` (a torch.device); `threads` and the plan
    are checked before it starts."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidInput(f"threads must be an int >= 1, not {threads!r}")
    return PrefetchLoader(native, plan, device, threads)
