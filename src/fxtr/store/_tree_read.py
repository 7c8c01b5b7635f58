"""Trees of parts read back: whole values, level by level, and what changed between two.

The trees are those of ``_tree`` (its docstring describes the nodes). ``load`` reads every
node of a tree (one read per level) and builds the value; ``changes`` compares two trees
reading only the nodes on the paths that differ.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Iterator
from typing import Any

from fxtr.experiment._entity import lookup_entity_type
from fxtr.store._tree import _SCALARS, TrackedDict, TrackedList, Tree


class MissingPartError(LookupError):
    """A node of a stored tree is not in the store (lost or damaged)."""


Fetch = Callable[[list[str]], dict[str, bytes]]
"""Reads parts by digest (``Store.get_blobs``)."""


def _children(body: list[Any]) -> Iterator[str]:
    kind = body[0]
    if kind in ("t", "L"):
        for item in body[1]:
            yield item[1] if kind == "t" else item
        return
    items = body[1] if kind in ("d", "l") else body[2] if kind == "e" else [body[1]]
    for item in items:
        child = item[1] if kind in ("d", "e") else item
        if type(child) is dict and "$n" in child:
            yield child["$n"]


def fetch_nodes(root: str, fetch: Fetch) -> dict[str, list[Any]]:
    """Every node of a stored tree, read level by level (one read per level).

    Nodes parsed before in this process are not read again (``_BODIES``: a node never
    changes, its digest names its bytes), so trees that share most of their nodes (the
    environments of one eval) cost the nodes they do not share.

    Raises:
        MissingPartError: a node is not in the store (or is damaged).
    """
    nodes: dict[str, list[Any]] = {}
    level = [root]
    while level:
        wanted = [d for d in level if d not in _BODIES]
        found = fetch(wanted) if wanted else {}
        missing = [d for d in wanted if d not in found]
        if missing:
            msg = (
                f"the stored environment {root[:16]} lacks its part {missing[0][:16]} (the "
                "store lost it or it was damaged). Clear the cache of this eval (fxtr cache "
                "clear) to build the environment again."
            )
            raise MissingPartError(msg)
        following: list[str] = []
        for digest in level:
            body = _BODIES.get(digest)
            if body is None:
                body = json.loads(found[digest])
                _remember(digest, body)
            nodes[digest] = body
            following.extend(c for c in _children(body) if c not in nodes)
        level = list(dict.fromkeys(following))
    return nodes


BODIES_MAX = 100_000
"""Parsed nodes a process keeps (a 7 MB environment is about 40,000)."""
_BODIES: collections.OrderedDict[str, list[Any]] = collections.OrderedDict()


def _remember(digest: str, body: list[Any]) -> None:
    _BODIES[digest] = body
    if len(_BODIES) > BODIES_MAX:
        _BODIES.popitem(last=False)


def build(
    root: str,
    nodes: dict[str, list[Any]],
    *,
    tracked: bool = False,
    entity: Callable[[str, dict[str, Any]], Any] | None = None,
) -> Any:
    """The value a tree holds: plain dicts and lists (``tracked``: tracked ones).

    ``entity(type_key, fields)`` makes an entity (by default, its class, imported).
    """
    from fxtr.experiment._encoding import from_tree

    def make_entity(key: str, fields: dict[str, Any]) -> Any:
        return lookup_entity_type(key)(**fields)

    make = entity or make_entity

    def value(child: Any, parent: Any = None, key: Any = None) -> Any:
        t = type(child)
        if t is dict and "$n" in child:
            out = node(child["$n"])
        elif tracked and (t is dict or t is list) and _flat(child):
            out = TrackedDict(child) if t is dict else TrackedList(child)
            out._fx_digest = ""
        elif t is dict or t is list:
            return from_tree(child)
        else:
            return child
        if tracked and parent is not None and hasattr(out, "_fx_parents"):
            out._fx_parents.append((parent, key))
        return out

    def entries(digest: str) -> Iterator[tuple[str, Any]]:
        body = nodes[digest]
        if body[0] == "t":
            for _, sub in body[1]:
                yield from entries(sub)
        else:
            yield from body[1]

    def node(digest: str) -> Any:
        body = nodes[digest]
        kind = body[0]
        if kind == "e":
            return make(body[1], {k: value(c) for k, c in body[2]})
        if kind == "v":
            return value(body[1])
        out: Any
        if kind in ("d", "t"):
            out = TrackedDict() if tracked else {}
            for k, c in sorted(entries(digest)):
                dict.__setitem__(out, k, value(c, out, k))
        else:
            items = body[1] if kind == "l" else [c for sub in body[1] for c in nodes[sub][1]]
            out = TrackedList() if tracked else []
            list.extend(out, (value(c, out, i) for i, c in enumerate(items)))
        if tracked:
            out._fx_digest = digest
        return out

    return node(root)


def _flat(child: Any) -> bool:
    values = child.values() if type(child) is dict else child
    return all(type(v) in _SCALARS for v in values)


def open_tree(root: str, fetch: Fetch) -> Tree:
    """A stored tree read back as a live ``Tree`` (tracked, its nodes' digests known).

    Raises:
        MissingPartError: a node is not in the store.
    """
    nodes = fetch_nodes(root, fetch)
    tree = Tree(build(root, nodes, tracked=True), known=nodes)
    tree.root = root
    return tree


def load(root: str, fetch: Fetch, **how: Any) -> Any:
    """A stored environment's whole value (see ``build``).

    Raises:
        MissingPartError: a node is not in the store.
    """
    return build(root, fetch_nodes(root, fetch), **how)


# what a call changed ---------------------------------------------------------------------

_ABSENT = object()
CHANGES_MAX = 50
"""Paths a diff lists at most (the rest are counted)."""


class _Nodes:
    """Nodes read on demand (one part at a time: a diff reads only the paths that differ)."""

    def __init__(self, fetch: Fetch) -> None:
        self.fetch = fetch
        self.bodies: dict[str, list[Any]] = {}

    def __call__(self, digest: str) -> list[Any]:
        body = self.bodies.get(digest)
        if body is None:
            data = self.fetch([digest]).get(digest)
            if data is None:
                msg = f"a part of a stored environment ({digest[:16]}) is not in the store"
                raise MissingPartError(msg)
            body = self.bodies[digest] = json.loads(data)
        return body

    def map_of(self, child: Any) -> tuple[str, dict[Any, Any]] | None:
        """A container child's kind and entries (key or index -> child); None: a scalar."""
        if type(child) is dict and "$n" in child:
            body = self(child["$n"])
            kind = body[0]
            if kind == "t":
                out: dict[Any, Any] = {}
                for _, sub in body[1]:
                    found = self.map_of({"$n": sub})
                    out.update(found[1] if found else {})
                return "dict", out
            if kind == "d":
                return "dict", {k: c for k, c in body[1]}
            if kind in ("l", "L"):
                items = body[1] if kind == "l" else [c for s in body[1] for c in self(s)[1]]
                return "list", dict(enumerate(items))
            if kind == "e":
                return "entity " + body[1], {k: c for k, c in body[2]}
            return None
        if type(child) is dict:
            return "dict", dict(child)
        if type(child) is list:
            return "list", dict(enumerate(child))
        return None

    def value(self, child: Any) -> Any:
        if type(child) is dict and "$n" in child:
            nodes = fetch_nodes(child["$n"], self.fetch)
            return build(child["$n"], nodes, entity=lambda key, fields: fields)
        return child


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def changes(old: str, new: str, fetch: Fetch, limit: int = CHANGES_MAX) -> list[str]:
    """What changed between two stored environments, as paths: ``a.b: "x" → "y"``.

    Only the nodes on differing paths are read (a trie's equal branches are skipped). A path
    added reads ``(absent) → value``, one removed ``value → (absent)``.
    """
    nodes = _Nodes(fetch)
    out: list[str] = []
    more = 0

    def same_trie(a: Any, b: Any) -> list[tuple[Any, Any]] | None:
        """Pairs of differing sub-tries, when both are tries of one shape."""
        if not (type(a) is dict and "$n" in a and type(b) is dict and "$n" in b):
            return None
        ba, bb = nodes(a["$n"]), nodes(b["$n"])
        if ba[0] != "t" or bb[0] != "t":
            return None
        ca, cb = dict(ba[1]), dict(bb[1])
        return [
            ({"$n": ca[h]} if h in ca else None, {"$n": cb[h]} if h in cb else None)
            for h in sorted(set(ca) | set(cb))
            if ca.get(h) != cb.get(h)
        ]

    def walk(path: str, a: Any, b: Any) -> None:
        nonlocal more
        if a == b:
            return
        pairs = same_trie(a, b)
        if pairs is not None and all(x is not None and y is not None for x, y in pairs):
            for x, y in pairs:
                walk(path, x, y)
            return
        ma = nodes.map_of(a) if a is not _ABSENT else None
        mb = nodes.map_of(b) if b is not _ABSENT else None
        if ma is not None and mb is not None and ma[0] == mb[0]:
            for key in sorted(set(ma[1]) | set(mb[1]), key=lambda k: (str(type(k)), k)):
                walk(_join(path, key), ma[1].get(key, _ABSENT), mb[1].get(key, _ABSENT))
            return
        if len(out) >= limit:
            more += 1
            return
        before = "(absent)" if a is _ABSENT else _show(nodes.value(a))
        after = "(absent)" if b is _ABSENT else _show(nodes.value(b))
        out.append(f"{path or '(root)'}: {before} → {after}")

    walk("", {"$n": old}, {"$n": new})
    if more:
        out.append(f"... and {more} more")
    return out
