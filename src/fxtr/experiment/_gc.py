"""Garbage collection while a job runs: fewer young collections, the older heap left alone.

A job allocates many small containers that live until it ends (invocation records, their
input fingerprints, entities, parsed cache entries). With CPython's default thresholds
(700, 10, 10) the collector runs every 700 allocations and scans, at each older collection,
everything the process held before the job too (a pytest session's items, an earlier
job's result): a quarter to a half of a cached agent rerun's CPU was the collector.

While a job runs, when the process uses the default thresholds, the first one is raised to
``JOB_THRESHOLD`` and the objects alive when the job starts are frozen (``gc.freeze``: not
scanned, never freed while frozen) unless the process froze some itself; both are undone
when the last running job ends. A process that tunes or disables its collector is left as
it is. Nothing is ever freed that is still reachable: only when garbage cycles are found
changes.

Garbage alive when a pass starts is frozen with the rest until the job ends: at 200,000
invocations the verifying pass holds the live pass's, 28 MiB of the cold peak (392 MiB, under
the 400 MiB target). A full collection before freezing frees it, but costs one full
collection per job (the test suite ran 2.4 times as long): not done.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

DEFAULT_THRESHOLDS = (700, 10, 10)
"""CPython's default ``gc.get_threshold()``: the only setting changed."""
JOB_THRESHOLD = 10_000
"""Net allocations between two young collections while a job runs."""

_lock = threading.Lock()
_running = 0
_changed: tuple[bool, bool] = (False, False)
"""Whether the outermost running job raised the threshold, and whether it froze the heap."""


@contextmanager
def job_collection() -> Iterator[None]:
    """Collect less while the body runs (see the module's docstring); nests and overlaps."""
    global _running, _changed
    with _lock:
        if _running == 0:
            raised = gc.isenabled() and gc.get_threshold() == DEFAULT_THRESHOLDS
            froze = raised and gc.get_freeze_count() == 0
            if raised:
                gc.set_threshold(JOB_THRESHOLD, *DEFAULT_THRESHOLDS[1:])
            if froze:
                gc.freeze()
            _changed = (raised, froze)
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0:
                raised, froze = _changed
                if froze:
                    gc.unfreeze()
                if raised and gc.get_threshold()[0] == JOB_THRESHOLD:
                    gc.set_threshold(*DEFAULT_THRESHOLDS)
                _changed = (False, False)
