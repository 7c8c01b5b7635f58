"""The project store: the step cache, its history and claims, entities and job records.

One directory (``.fxtr/`` by default) holds a diskcache ``Cache`` under ``cache/``; every
kind of record lives in it under its own key prefix, so one transaction can write a result,
its job record and the release of its claim together.
"""

from fxtr.store._diskcache import Batch, CacheEntry, DiskStore, open_store

__all__ = ["Batch", "CacheEntry", "DiskStore", "open_store"]
