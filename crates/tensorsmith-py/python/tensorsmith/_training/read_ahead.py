"""Read-ahead and release of cached shards along one process's reading order, for
`TensorIterableDataset` on a store dataset: threads fetch the next `ahead` shards the order
will need into the node's cache (in the order of their first use, one thread per shard ahead
and at most `MAX_FETCHES`, so that many fetches are in flight) while samples are read, and
each shard is closed once the order has passed its last use, so the cache may evict it.

The threads are joined when the reading ends (`close`) and, for a reading abandoned without
being closed, before the interpreter finalizes (`atexit`): a daemon thread still inside a
fetch at exit would be stopped by the interpreter with pthread_exit when it retakes the GIL,
and that forced unwind through native frames aborts the process ("terminate called without an
active exception")."""

import atexit
import threading
import weakref

import numpy as np

_LIVE = weakref.WeakSet()
MAX_FETCHES = 4  # fetch threads of one reading, at most


@atexit.register
def _close_all():
    for ra in list(_LIVE):
        ra.close()


class ReadAhead:
    def __init__(self, shards, samples, ahead):
        """`samples`: the process's sample indices in reading order (1-D array-like)."""
        self.s = shards
        seq = np.asarray(samples, dtype=np.int64)
        of = np.searchsorted(np.asarray(shards.starts, dtype=np.int64), seq, side="right") - 1
        ks, first = np.unique(of, return_index=True)
        _, last_rev = np.unique(of[::-1], return_index=True)
        last = len(of) - 1 - last_rev
        by_first = np.argsort(first, kind="stable")
        self.order = ks[by_first].tolist()  # shards by first use
        self.first = first[by_first].tolist()
        by_last = np.argsort(last, kind="stable")
        self.done = list(zip(last[by_last].tolist(), ks[by_last].tolist()))  # (last use, k)
        self._next_done = 0
        self.ahead = max(0, int(ahead))
        self._reached = 0  # shards of `order` whose first use the reader has reached
        self._cv = threading.Condition()
        self._stop = False
        self._next = 1  # the next shard of `order` to fetch (the first: the reader's own)
        self._threads = []
        if self.ahead and len(self.order) > 1:
            # One fetch per shard ahead at once: a shard's fetch is one request, and a few in
            # flight keep the store busy while this process reads.
            for _ in range(min(self.ahead, MAX_FETCHES, len(self.order) - 1)):
                t = threading.Thread(target=self._run, daemon=True,
                                     name="tensorsmith-read-ahead")
                t.start()
                self._threads.append(t)
            _LIVE.add(self)

    def at(self, pos):
        """The reader is about to read sample `pos` of the order (and is done with every
        sample before it)."""
        while self._next_done < len(self.done) and self.done[self._next_done][0] < pos:
            self.s.release(self.done[self._next_done][1])
            self._next_done += 1
        reached = self._reached
        while reached < len(self.first) and self.first[reached] <= pos:
            reached += 1
        if reached != self._reached:
            with self._cv:
                self._reached = reached
                self._cv.notify_all()

    def close(self):
        """Stops the threads and waits for them (fetches under way finish first), then lets
        go of the shards the reading still held (its last ones, or all it had open when it
        was abandoned), so a finished reader does not keep them from eviction."""
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join()
        _LIVE.discard(self)
        rest, self._next_done = self.done[self._next_done:], len(self.done)
        for _, k in rest:
            try:
                self.s.release(k)
            except Exception:  # noqa: BLE001 - at exit, the cache may be gone already
                pass

    def _take(self):
        """The next shard to fetch once the reader is close enough to it; None to stop."""
        with self._cv:
            while True:
                if self._stop or self._next >= len(self.order):
                    return None
                if self._next < self._reached + self.ahead:
                    self._next += 1
                    return self._next - 1
                self._cv.wait()

    def _run(self):
        j = self._take()
        while j is not None:
            try:
                if not self.s.prefetch(self.order[j]):
                    # No room without waiting: try again once the reader moves on.
                    with self._cv:
                        reached = self._reached
                        self._cv.wait_for(lambda: self._stop or self._reached != reached)
                        if self._stop:
                            return
                    continue
            except Exception:  # the reader's own fetch reports it
                pass
            j = self._take()
