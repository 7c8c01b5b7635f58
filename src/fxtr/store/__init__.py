"""The project store: the step cache, its history and claims, entities and job records.

``Store`` is the protocol; ``DiskStore`` is the embedded default (one directory, ``.fxtr/``,
holding a diskcache ``Cache`` in which every kind of record has its own key prefix, so one
transaction writes a result, its job record and the release of its claim together), and
``PostgresStore`` (``fxtr[postgres]``) gives a team and its CI runners one store.
``open_store`` takes a directory or a ``postgresql://`` URL.
"""

from typing import Any

from fxtr.store._diskcache import Batch, CacheEntry, DiskStore, is_url, open_store
from fxtr.store._protocol import Store

__all__ = ["Batch", "CacheEntry", "DiskStore", "PostgresStore", "Store", "is_url", "open_store"]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":  # imported on use: psycopg is an optional extra
        from fxtr.store._postgres import PostgresStore

        return PostgresStore
    raise AttributeError(name)
