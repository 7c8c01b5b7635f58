"""The canonical, typed encoding of values that cross a step boundary, and fingerprints.

The encoding is JSON with sorted keys and a few tagged objects, prefixed by a schema version.
It never uses pickle, so the same value has the same bytes in every process and under every
``PYTHONHASHSEED``. Ints and floats stay apart (``1`` and ``1.0``), floats are exact
(``repr`` round-trips), dict and set order do not matter.

Tags (a dict with one ``$`` key):
``{"$set": [...]}``, ``{"$entity": "mod:Qual", "v": {...}}``,
``{"$data": "mod:Qual", "v": {...}}`` (a dataclass that is not an entity),
``{"$ref": "mod:Qual", "id": ...}``,
``{"$array": [[dim, "str"|"int"], ...], "keys": [...], "cells": [...]}`` and
``{"$dict": [[key, value], ...]}`` for a user dict whose keys would look like a tag.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from fxtr.experiment._array import Array
from fxtr.experiment._entity import (
    BoundID,
    Entity,
    entity_type_key,
    install_content_hash,
    lookup_entity_type,
)
from fxtr.experiment._types import KEY_TYPES, Dim

SCHEMA = "fxtr1"
"""Version of the encoding; part of every fingerprint, so a change of schema never collides."""

_PREFIX = (SCHEMA + ":").encode()
_ACCEPTED = (
    "str, int, float, bool, None, list, tuple, dict with str keys, set, Entity, BoundID, Array, "
    "dataclass"
)
_dumps = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True
).encode


class EncodingError(TypeError):
    """A value has no canonical encoding."""


def _path(path: tuple[Any, ...]) -> str:
    return "value" + "".join(f"[{p!r}]" for p in path)


def to_tree(value: Any, path: tuple[Any, ...] = ()) -> Any:
    """Convert a value to its canonical JSON-able tree.

    Raises:
        EncodingError: a part of the value has no canonical encoding.
    """
    t = type(value)
    if t is str or t is int or t is float or t is bool or value is None:
        return value
    if t is list or t is tuple:
        return [to_tree(v, (*path, i)) for i, v in enumerate(value)]
    if t is dict:
        if all(type(k) is str and not k.startswith("$") for k in value):
            return {k: to_tree(v, (*path, k)) for k, v in value.items()}
        bad = next((k for k in value if type(k) is not str), None)
        if bad is not None:
            msg = (
                f"{_path(path)} is a dict with a key {bad!r} of type {type(bad).__name__}; "
                "dict keys must be str to have a canonical encoding. Convert the keys to str."
            )
            raise EncodingError(msg)
        return {"$dict": sorted([k, to_tree(v, (*path, k))] for k, v in value.items())}
    if isinstance(value, Entity):
        added = t.__entity_defaults__
        fields = {}
        for name in t.__entity_fields__:
            field = getattr(value, name)
            if name in added and type(field) is type(added[name]) and field == added[name]:
                continue  # a field added later, at its default: encoded as before it existed
            fields[name] = to_tree(field, (*path, name))
        return {"$entity": entity_type_key(t), "v": fields}
    if t is BoundID:
        return {"$ref": entity_type_key(value.entity_type), "id": value.id}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if "<locals>" in t.__qualname__:
            msg = (
                f"{_path(path)} is a {t.__qualname__}, a dataclass defined inside a function, "
                "which cannot be read back by name. Define it at module level."
            )
            raise EncodingError(msg)
        fields = {
            f.name: to_tree(getattr(value, f.name), (*path, f.name))
            for f in dataclasses.fields(value)
            if f.init
        }
        return {"$data": entity_type_key(t), "v": fields}
    if t is Array:
        return {
            "$array": [[d.name, d.key_type.__name__] for d in value.dim_specs],
            "keys": [list(value.keys(d.name)) for d in value.dim_specs],
            "cells": [to_tree(v, (*path, k)) for k, v in value.items()],
        }
    if t is set or t is frozenset:
        items = [to_tree(v, (*path, "<set item>")) for v in value]
        return {"$set": sorted(items, key=_dumps)}
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        # str/int/float subclasses (enums, numpy scalars registered as such): their base value
        for base in (str, int, float):
            if isinstance(value, base):
                return base(value)
    msg = (
        f"{_path(path)} of type {t.__module__}.{t.__qualname__} has no canonical encoding. "
        f"Accepted: {_ACCEPTED}. Convert it to one of those (or define an Entity for it)."
    )
    raise EncodingError(msg)


def encode_text(value: Any) -> str:
    """The canonical JSON text of a value (without the schema prefix).

    Raises:
        EncodingError: the value has no canonical encoding, including an int over Python's
            4,300-digit limit and nesting deeper than the interpreter's stack.
    """
    try:
        return _dumps(to_tree(value))
    except RecursionError:
        msg = "the value nests too deeply to encode (flatten it, or make it an Entity)"
        raise EncodingError(msg) from None
    except ValueError as exc:
        msg = f"the value cannot be encoded: {exc}"
        raise EncodingError(msg) from None


def encode(value: Any) -> bytes:
    """The canonical bytes of a value: schema prefix and canonical JSON."""
    return _PREFIX + encode_text(value).encode()


def fingerprint(value: Any) -> str:
    """The sha256 hex digest of a value's canonical encoding."""
    return hashlib.sha256(encode(value)).hexdigest()


def fingerprint_text(text: str) -> str:
    """The fingerprint of a value given its canonical JSON text."""
    return hashlib.sha256(_PREFIX + text.encode()).hexdigest()


def from_tree(tree: Any) -> Any:
    """Rebuild a value from its canonical tree (tuples come back as lists)."""
    t = type(tree)
    if t is list:
        return [from_tree(v) for v in tree]
    if t is not dict:
        return tree
    if len(tree) <= 3:
        if "$entity" in tree:
            cls = lookup_entity_type(tree["$entity"])
            return cls(**{k: from_tree(v) for k, v in tree["v"].items()})
        if "$data" in tree:  # a dataclass (not an entity): looked up as entities are
            data_cls: Any = lookup_entity_type(tree["$data"])
            return data_cls(**{k: from_tree(v) for k, v in tree["v"].items()})
        if "$ref" in tree:
            return BoundID(tree["id"], lookup_entity_type(tree["$ref"]))
        if "$set" in tree:
            return {_hashable(from_tree(v)) for v in tree["$set"]}
        if "$dict" in tree:
            return {k: from_tree(v) for k, v in tree["$dict"]}
        if "$array" in tree:
            dims = tuple(Dim(n, KEY_TYPES[kt]) for n, kt in tree["$array"])
            cells = [from_tree(v) for v in tree["cells"]]
            return Array.from_cells(dims, tree["keys"], cells)
    return {k: from_tree(v) for k, v in tree.items()}


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


_LITERALS = {"true": True, "false": False, "null": None}


def decode_text(text: str) -> Any:
    """Rebuild a value from its canonical JSON text."""
    # fast path for bare numbers and literals, the commonest step results
    first = text[:1]
    if first in _NUMBER_START:
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                pass
    elif text in _LITERALS:
        return _LITERALS[text]
    return from_tree(json.loads(text))


_NUMBER_START = frozenset("-0123456789")


install_content_hash(fingerprint)
