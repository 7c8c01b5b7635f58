"""Values stored as content-addressed trees of parts: agents' environments (DESIGN §18).

A value (a dict, a list, an ``Entity``, nested) is stored as a tree of *nodes*, each one
part of the store (``blob_digest`` of its bytes): every dict, list and entity is a node
whose children are inline when they are scalars (or small flat containers) and
``{"$n": DIGEST}`` when they are nodes. The root's digest names the whole value: an agent's
tool call's fingerprint uses it (``fxtr.agents``' ``StoredEnv``), and a call that changes
one booking of a 7 MB database stores the nodes on the path from the root to the change,
not the database; identical subtrees are one part.

Node bodies (canonical JSON lists):

- ``["d", [[key, child], ...]]``: a dict, keys sorted; a dict of more than ``NODE_MAX`` keys
  is a trie: ``["t", [[hex, DIGEST], ...]]`` groups its keys by the hex digits of their
  sha1 (``_shape`` digits deep), so a changed key rewrites its leaf and the trie nodes
  above it, not the dict's every key;
- ``["l", [child, ...]]``: a list; a long one is ``["L", [DIGEST, ...]]`` of chunks;
- ``["e", "module:Qualname", [[field, child], ...]]``: an entity;
- ``["v", value]``: a root that is a scalar.

``Tree`` holds a trajectory's live environment as *tracked* containers (``TrackedDict``,
``TrackedList``: a dict and a list that note their changes): each remembers its node's
digest until it, or something under it, changes, and a dict which of its keys changed, so
hashing after a call costs in proportion to what the call changed. A plain dict or list
put into it is hashed whole and tracked from then on. Whole values come back from the
store with ``_tree_read.load`` (level by level, one read per level).
"""

from __future__ import annotations

import collections
import hashlib
import json
import math
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from fxtr.experiment._encoding import EncodingError, to_tree
from fxtr.experiment._entity import Entity, entity_type_key

NODE_MAX = 32
"""Entries of a dict leaf or a list chunk (a node of this many entries is a few KB)."""

_dumps = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True
).encode


@lru_cache(maxsize=1 << 18)
def _khash(key: str) -> str:
    return hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()


def _shape(n: int) -> int:
    """Hex digits of a dict trie: 0 (one leaf) up to ``NODE_MAX`` keys, then ~8 a leaf."""
    return 0 if n <= NODE_MAX else max(1, math.ceil(math.log(n / 8, 16)))


def _touch(node: Any, key: Any = None) -> None:
    """A node changed (at ``key``): it and every node above it forget their digest."""
    stack = [(node, key)]
    while stack:
        n, k = stack.pop()
        if isinstance(n, TrackedDict):
            if n._fx_dirty is not None:
                n._fx_dirty.add(k)
        if n._fx_digest is not None:
            n._fx_digest = None
            stack.extend(n._fx_parents)


class TrackedDict(dict[Any, Any]):
    """A dict that notes which keys changed (the environment a tool is given is made of these).

    It is a ``dict`` to the tool (``isinstance``, ``json.dumps``); copies of it are plain.
    """

    __slots__ = ("_fx_digest", "_fx_dirty", "_fx_groups", "_fx_nodes", "_fx_parents")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fx_digest: str | None = None
        self._fx_parents: list[tuple[Any, Any]] = []
        self._fx_dirty: set[Any] | None = None  # None: every key (hash it whole)
        self._fx_groups: dict[str, set[str]] = {}
        self._fx_nodes: dict[str, str] = {}

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        _touch(self, key)

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        _touch(self, key)

    def pop(self, key: Any, *default: Any) -> Any:
        value = super().pop(key, *default)
        _touch(self, key)
        return value

    def popitem(self) -> tuple[Any, Any]:
        key, value = super().popitem()
        _touch(self, key)
        return key, value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> TrackedDict:  # type: ignore[override,misc]
        self.update(other)
        return self

    def clear(self) -> None:
        super().clear()
        self._fx_dirty = None
        _touch(self)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        import copy

        return {k: copy.deepcopy(v, memo) for k, v in self.items()}


def _list_method(name: str) -> Callable[..., Any]:
    base = getattr(list, name)

    def method(self: TrackedList, *args: Any, **kwargs: Any) -> Any:
        out = base(self, *args, **kwargs)
        _touch(self)
        return self if name in ("__iadd__", "__imul__") else out

    method.__name__ = name
    return method


class TrackedList(list[Any]):
    """A list that notes that it changed; copies of it are plain."""

    __slots__ = ("_fx_digest", "_fx_parents")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._fx_digest: str | None = None
        self._fx_parents: list[tuple[Any, Any]] = []

    def __reduce__(self) -> Any:
        return (list, (list(self),))

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        import copy

        return [copy.deepcopy(v, memo) for v in self]


for _name in (
    "__setitem__",
    "__delitem__",
    "__iadd__",
    "__imul__",
    "append",
    "extend",
    "insert",
    "pop",
    "remove",
    "clear",
    "sort",
    "reverse",
):
    setattr(TrackedList, _name, _list_method(_name))


class _EntityNode:
    """An entity in a tree: frozen itself, its node changes when a container in it does."""

    __slots__ = ("_fx_digest", "_fx_parents", "entity")

    def __init__(self, entity: Entity) -> None:
        self.entity = entity
        self._fx_digest: str | None = None
        self._fx_parents: list[tuple[Any, Any]] = []


INLINE_MAX = 8
"""A dict or list of at most this many scalars is held inline by its parent's node."""
_SCALARS = (str, int, float, bool, type(None))


def _inline(node: Any) -> bool:
    if type(node) is TrackedDict:
        return len(node) <= INLINE_MAX and all(
            type(k) is str and not k.startswith("$") and type(v) in _SCALARS
            for k, v in dict.items(node)
        )
    return (
        type(node) is TrackedList
        and len(node) <= INLINE_MAX
        and all(type(v) in _SCALARS for v in node)
    )


def _adopt(child: Any, parent: Any, key: Any) -> None:
    for p, k in child._fx_parents:
        if p is parent and k == key:
            return
    child._fx_parents.append((parent, key))


class Tree:
    """A trajectory's live environment and the digests of its nodes, kept across its calls."""

    def __init__(self, value: Any, known: Iterable[str] = ()) -> None:
        self.value = value
        """The environment the tools change (its containers tracked once hashed)."""
        self.known: set[str] = set(known)
        """Digests of nodes already in the store (or already handed out to be written)."""
        self.root: str | None = None
        """The root digest as ``commit`` last computed it."""
        self._entities: dict[int, _EntityNode] = {}
        self._volatile = False  # a set in the tree (untracked): hash everything each time

    def commit(self) -> tuple[str, dict[str, bytes]]:
        """The root digest now, and the nodes made since the last commit (by digest).

        Raises:
            EncodingError: a part of the environment has no canonical encoding.
        """
        if self._volatile:
            self._forget(self.value)
        new: dict[str, bytes] = {}
        ref = self._ref(None, None, self.value, new)
        root = ref["$n"] if isinstance(ref, dict) and "$n" in ref else self._emit(["v", ref], new)
        self.root = root
        return root, new

    def current(self) -> bool:
        """Whether the environment is as ``commit`` last hashed it (nothing changed since)."""
        node = self._node_of(self.value)
        return self.root is not None and (node is None or node._fx_digest is not None)

    def _node_of(self, value: Any) -> Any:
        if isinstance(value, (TrackedDict, TrackedList)):
            return value
        if isinstance(value, Entity):
            return self._entities.get(id(value))
        return None

    def _emit(self, body: Any, new: dict[str, bytes]) -> str:
        data = _dumps(body).encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(data).hexdigest()
        if digest not in self.known:
            self.known.add(digest)
            new[digest] = data
        return digest

    # hashing ------------------------------------------------------------------------

    def _ref(self, parent: Any, key: Any, value: Any, new: dict[str, bytes]) -> Any:
        """A child as its parent's node holds it: a scalar inline, a container by digest."""
        t = type(value)
        if t is str or t is int or t is float or t is bool or value is None:
            return value
        if t is TrackedDict or t is TrackedList:
            node = value
        elif t is dict or t is list or t is tuple:
            node = TrackedDict(value) if t is dict else TrackedList(value)
            if parent is not None:  # the tree holds the tracked one from now on
                _put(parent, key, node)
            else:
                self.value = node
        elif isinstance(value, Entity):
            node = self._entities.get(id(value))
            if node is None or node.entity is not value:
                node = self._entities[id(value)] = _EntityNode(value)
        elif t is set:
            self._volatile = True
            return to_tree(value)
        else:
            return to_tree(value)
        if parent is not None:
            _adopt(node, parent, key)
        digest = node._fx_digest
        if digest == "" or (digest is None and _inline(node)):
            node._fx_digest = ""  # small and flat: held inline by its parent's node
            return dict(node) if type(node) is TrackedDict else list(node)
        if digest is None:
            if type(node) is TrackedDict:
                digest = self._dict(node, new)
            elif type(node) is TrackedList:
                digest = self._list(node, new)
            else:
                digest = self._entity(node, new)
            node._fx_digest = digest
        return {"$n": digest}

    def _dict(self, node: TrackedDict, new: dict[str, bytes]) -> str:
        for key in node:
            if type(key) is not str:
                msg = (
                    f"a dict of the environment has a key {key!r} of type "
                    f"{type(key).__name__}; keys must be str. Convert the keys to str."
                )
                raise EncodingError(msg)
        depth = _shape(len(node))
        if depth == 0:  # one leaf: hashed whole
            node._fx_groups, node._fx_nodes, node._fx_dirty = {}, {}, set()
            entries = [[k, self._ref(node, k, v, new)] for k, v in dict.items(node)]
            entries.sort(key=lambda e: e[0])
            return self._emit(["d", entries], new)
        dirty = node._fx_dirty
        if dirty is None or depth != len(next(iter(node._fx_groups), "")) or not node._fx_nodes:
            node._fx_groups = collections.defaultdict(set)
            for key in node:
                node._fx_groups[_khash(key)[:depth]].add(key)
            leaves = set(node._fx_groups)
            node._fx_nodes = {}
        else:
            leaves = set()
            for key in dirty:
                prefix = _khash(key)[:depth] if isinstance(key, str) else None
                if prefix is None:  # a change with no key (a child's, moved): every leaf
                    leaves = set(node._fx_groups)
                    break
                group = node._fx_groups.setdefault(prefix, set())
                if key in node:
                    group.add(key)
                else:
                    group.discard(key)
                leaves.add(prefix)
        node._fx_dirty = set()
        nodes = node._fx_nodes
        for prefix in leaves:
            keys = node._fx_groups.get(prefix)
            if keys:
                entries = [[k, self._ref(node, k, dict.__getitem__(node, k), new)] for k in keys]
                entries.sort(key=lambda e: e[0])
                nodes[prefix] = self._emit(["d", entries], new)
            else:
                nodes.pop(prefix, None)
                node._fx_groups.pop(prefix, None)
        for level in range(depth - 1, -1, -1):  # the trie nodes above the changed leaves
            parents = {p[:level] for p in leaves}
            for prefix in parents:
                children = [
                    [h, nodes[prefix + h]] for h in "0123456789abcdef" if prefix + h in nodes
                ]
                if children:
                    nodes[prefix] = self._emit(["t", children], new)
                else:
                    nodes.pop(prefix, None)
            leaves = parents
        return nodes.get("") or self._emit(["d", []], new)

    def _list(self, node: TrackedList, new: dict[str, bytes]) -> str:
        refs = [self._ref(node, i, v, new) for i, v in enumerate(node)]
        if len(refs) <= 2 * NODE_MAX:
            return self._emit(["l", refs], new)
        chunks = [
            self._emit(["l", refs[i : i + NODE_MAX]], new) for i in range(0, len(refs), NODE_MAX)
        ]
        return self._emit(["L", chunks], new)

    def _entity(self, node: _EntityNode, new: dict[str, bytes]) -> str:
        entity = node.entity
        fields = []
        for name in type(entity).__entity_fields__:
            fields.append([name, self._ref(node, name, getattr(entity, name), new)])
        return self._emit(["e", entity_type_key(type(entity)), fields], new)

    def _forget(self, value: Any) -> None:
        """Every digest under ``value`` forgotten (a set can change unseen)."""
        stack = [value]
        while stack:
            v = stack.pop()
            node = self._node_of(v)
            if node is None:
                continue
            node._fx_digest = None
            if type(node) is TrackedDict:
                node._fx_dirty = None
                stack.extend(node.values())
            elif type(node) is TrackedList:
                stack.extend(node)
            else:
                stack.extend(getattr(v, n) for n in type(v).__entity_fields__)


def _put(parent: Any, key: Any, node: Any) -> None:
    """Replace a plain container by its tracked copy, without noting it as a change."""
    if type(parent) is TrackedDict:
        dict.__setitem__(parent, key, node)
    elif type(parent) is TrackedList:
        list.__setitem__(parent, key, node)
    else:
        object.__setattr__(parent.entity, key, node)
