"""The project store: the step cache, its history and claims, entities and job records.

``Store`` is the protocol; ``DiskStore`` is the embedded default (one directory, ``.fxtr/``,
holding a diskcache ``Cache`` in which every kind of record has its own key prefix, so one
transaction writes a result, its invocation record and the release of its claim together,
and a second one for job records alone, so listing jobs never reads the cache), and
``PostgresStore`` (``pytest-fxtr[postgres]``) gives a team and its CI runners one store.
``open_store`` takes a directory or a ``postgresql://`` URL.

Both keep content-addressed *parts*: bytes stored once per store under their digest
(``blob_digest``), written with the entries that name them (``Batch.blobs``) and read back
verified (``get_blobs``: a part whose bytes no longer hash to its digest is absent). A value
kept as a ``Tree`` of parts (an agent's environment) is hashed as it changes and stores what
changed; ``load`` and ``open_tree`` read one back, ``changes`` lists what differs as paths.
"""

from typing import Any

from fxtr.store._base import Batch, CacheEntry, StoreError, blob_digest, is_url
from fxtr.store._diskcache import DiskStore
from fxtr.store._factory import open_store
from fxtr.store._protocol import Store
from fxtr.store._tree import TrackedDict, TrackedList, Tree
from fxtr.store._tree_read import MissingPartError, changes, load, open_tree

__all__ = [
    "Batch",
    "CacheEntry",
    "DiskStore",
    "MissingPartError",
    "PostgresStore",
    "Store",
    "StoreError",
    "TrackedDict",
    "TrackedList",
    "Tree",
    "blob_digest",
    "changes",
    "is_url",
    "load",
    "open_store",
    "open_tree",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":  # imported on use: psycopg is an optional extra
        from fxtr.store._postgres import PostgresStore

        return PostgresStore
    raise AttributeError(name)
