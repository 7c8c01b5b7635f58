"""``StoredEnv``: an agent's environment by the root digest of its tree in the store.

The tree itself (its nodes, hashing as the tools change it, reading it back, diffs) is
``fxtr.store._tree``; ``_env`` holds the steps that build and act on it.
"""

from __future__ import annotations

from fxtr.experiment.entities import Entity


class StoredEnv(Entity):
    """An environment by its root digest: what tool calls take and return, and records keep."""

    root: str
    """The digest of the environment's root node (a part of the store)."""
