"""``open_store``: the store at a directory (diskcache) or a ``postgresql://`` URL."""

from __future__ import annotations

import atexit
import contextlib
import os
from typing import Any

from fxtr.store._base import is_url

_OPEN: dict[str, Any] = {}


@atexit.register
def _close_all() -> None:
    """Close the stores this process opened (connections are not left to the collector)."""
    for store in list(_OPEN.values()):
        with contextlib.suppress(Exception):
            store.close()


def open_store(location: Any) -> Any:
    """The store at a directory (diskcache) or a ``postgresql://`` URL.

    Opened once per process and location; a store object is returned as it is.
    """
    if hasattr(location, "write") and hasattr(location, "get_entries"):
        return location
    if is_url(location):
        key = str(location)
        store = _OPEN.get(key)
        if store is None or store.closed:
            from fxtr.store._postgres import PostgresStore

            store = _OPEN[key] = PostgresStore(key)
        return store
    key = os.path.abspath(location)
    store = _OPEN.get(key)
    if store is None or store.closed:
        from fxtr.store._diskcache import DiskStore

        store = _OPEN[key] = DiskStore(key)
    return store
