"""The project store: the step cache, its history and claims, entities and job records.

``Store`` is the protocol; ``DiskStore`` is the embedded default (one directory, ``.fxtr/``,
holding a diskcache ``Cache`` in which every kind of record has its own key prefix, so one
transaction writes a result, its invocation record and the release of its claim together,
and a second one for job records alone, so listing jobs never reads the cache), and
``PostgresStore`` (``pytest-fxtr[postgres]``) gives a team and its CI runners one store.
``open_store`` takes a directory or a ``postgresql://`` URL.
"""

from typing import Any

from fxtr.store._base import Batch, CacheEntry, StoreError, is_url
from fxtr.store._diskcache import DiskStore
from fxtr.store._factory import open_store
from fxtr.store._protocol import Store

__all__ = [
    "Batch",
    "CacheEntry",
    "DiskStore",
    "PostgresStore",
    "Store",
    "StoreError",
    "is_url",
    "open_store",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":  # imported on use: psycopg is an optional extra
        from fxtr.store._postgres import PostgresStore

        return PostgresStore
    raise AttributeError(name)
