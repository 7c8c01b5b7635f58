"""Stored values made ready to show: entities as fields, references loaded, long text cut."""

from __future__ import annotations

import itertools
import json
from typing import Any

from fxtr.store import Store

__all__ = ["MAX_CELLS", "MAX_STRING", "render_tree", "render_value"]

MAX_STRING = 20_000
"""Longer strings are cut in views, with a marker saying how much is left out."""
MAX_CELLS = 200
"""Array cells shown per value; the rest is counted."""


def render_tree(tree: Any, store: Store, depth: int = 0) -> Any:
    """A canonical value tree made ready to show.

    Entities become fields, references are loaded, arrays become cells and long strings are
    cut. Nothing is imported or executed.
    """
    if isinstance(tree, str):
        if len(tree) > MAX_STRING:
            return {"kind": "text", "text": tree[:MAX_STRING], "omitted": len(tree) - MAX_STRING}
        return tree
    if isinstance(tree, list):
        shown = [render_tree(v, store, depth + 1) for v in tree[:MAX_CELLS]]
        if len(tree) > MAX_CELLS:
            shown.append({"kind": "omitted", "count": len(tree) - MAX_CELLS})
        return shown
    if not isinstance(tree, dict):
        return tree
    if tree.get("$entity") == STORED_TREE and isinstance(tree.get("v"), dict):
        return {
            "kind": "entity",
            "type": "StoredEnv",
            "fields": {"root": tree["v"].get("root")},
            "value": render_tree(_whole(store, tree["v"].get("root")), store, depth + 1),
        }
    if "$entity" in tree:
        return {
            "kind": "entity",
            "type": tree["$entity"].rpartition(":")[2],
            "fields": {k: render_tree(v, store, depth + 1) for k, v in tree["v"].items()},
        }
    if "$ref" in tree:
        out: dict[str, Any] = {
            "kind": "ref",
            "type": tree["$ref"].rpartition(":")[2],
            "id": tree["id"],
        }
        text = store.get_entity(tree["id"]) if depth < 6 else None
        if text is not None:
            out["entity"] = render_tree(json.loads(text), store, depth + 1)
        return out
    if "$array" in tree:
        dims = [d for d, _ in tree["$array"]]
        keys = list(itertools.product(*tree["keys"]))
        cells = [
            [list(k), render_tree(v, store, depth + 1)]
            for k, v in zip(keys[:MAX_CELLS], tree["cells"], strict=False)
        ]
        return {"kind": "array", "dims": dims, "cells": cells, "size": len(keys)}
    if "$set" in tree:
        return render_tree(tree["$set"], store, depth)
    if "$dict" in tree:
        return {k: render_tree(v, store, depth + 1) for k, v in tree["$dict"]}
    return {k: render_tree(v, store, depth + 1) for k, v in tree.items()}


STORED_TREE = "fxtr.agents._state:StoredEnv"
"""A value kept as a tree of the store's parts (an agent's environment), by its root."""


def _whole(store: Store, root: Any) -> Any:
    """The canonical tree of a value kept as parts; a note when a part is missing."""
    from fxtr.store import MissingPartError, load

    try:
        return load(str(root), store.get_blobs, entity=lambda key, v: {"$entity": key, "v": v})
    except (MissingPartError, ValueError, TypeError, LookupError):
        return {"kind": "missing", "text": f"a part of the stored value {root} is missing"}


def render_value(text: str | None, store: Store) -> Any:
    """Render a value from its canonical text (``None`` when there is none)."""
    if text is None:
        return None
    return render_tree(json.loads(text), store)
