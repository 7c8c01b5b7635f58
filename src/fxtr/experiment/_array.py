"""Dense arrays of values indexed by named dimensions with typed keys, and their alignment."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from fxtr.experiment._types import Dim, check_value, format_dims, parse_dims, type_name

T = TypeVar("T")
Key = str | int


def _key_type_of(dim: str, keys: Sequence[Any]) -> type:
    types = {type(k) for k in keys}
    if types <= {str}:
        return str
    if types <= {int}:
        return int
    shown = ", ".join(sorted(t.__name__ for t in types))
    msg = (
        f"Keys of dimension {dim!r} must all be str or all be int, got {shown}. Convert the "
        "keys, or declare the dimension's key type."
    )
    raise ValueError(msg)


def as_dims(dims: str | Sequence[str | Dim | tuple[str, type]]) -> list[str | Dim]:
    """Dimensions as given: a dimension string's ``Dim``s, or names and ``(name, type)`` pairs."""
    if isinstance(dims, str):
        return list(parse_dims(dims))
    out: list[str | Dim] = []
    for d in dims:
        if isinstance(d, str):
            out.append(d)
        elif isinstance(d, tuple) and len(d) == 2:
            out.append(Dim(d[0], d[1]))
        else:
            msg = f"Dimension {d!r} must be a name or a (name, key type) pair."
            raise TypeError(msg)
    return out


class Array(Generic[T]):
    """Values indexed by named dimensions with typed keys; dense, immutable.

    Every combination of keys holds exactly one value. Keys keep first-seen order.

    Example::

        scores = Array.from_mapping({"a": {"p1": 0.5, "p2": 1.0}}, dims=["model", "prompt"],
                                    value_type=float)
        scores["a", "p2"]        # 1.0
        scores.sel(model="a")    # Array over [prompt]
    """

    __slots__ = ("_cells", "_dims", "_keys", "_source", "_value_type")

    def __init__(
        self,
        dims: tuple[Dim, ...],
        keys: tuple[tuple[Key, ...], ...],
        cells: dict[tuple[Key, ...], T],
        value_type: Any = Any,
    ) -> None:
        """Build an array from parts; prefer ``scalar``, ``from_mapping`` or ``from_cells``."""
        if len(cells) != math.prod(len(k) for k in keys):
            msg = "Array cells do not cover every combination of keys exactly once."
            raise ValueError(msg)
        self._dims = dims
        self._keys = keys
        self._cells = cells
        self._value_type = value_type
        self._source: dict[str, Any] | None = None

    # construction ---------------------------------------------------------------------

    @classmethod
    def scalar(cls, value: T, value_type: Any = Any) -> Array[T]:
        """An array with no dimensions holding one value."""
        _check_type(value, value_type, ())
        return cls((), (), {(): value}, value_type)

    @classmethod
    def from_mapping(
        cls,
        mapping: Mapping[Any, Any],
        dims: str | Sequence[str | Dim | tuple[str, type]],
        value_type: Any = Any,
    ) -> Array[Any]:
        """An array from a mapping nested ``len(dims)`` levels deep.

        Args:
            mapping: ``{key: value}`` for one dimension, ``{key: {key: value}}`` for two, ...
                Anything nested deeper than ``len(dims)`` is a value.
            dims: dimension names (key types taken from the keys), ``(name, type)`` pairs, or
                a dimension string such as ``"[model: str, prompt: str]"``.
            value_type: the type of the values, checked for each one.

        Raises:
            ValueError: the mapping is ragged (a level's key sets differ) or too shallow.
            TypeError: a value is not of ``value_type``, or a key is not of its dimension's type.
        """
        spec = as_dims(dims)
        if not spec:
            return cls.scalar(mapping, value_type)  # type: ignore[arg-type]
        names = [d if isinstance(d, str) else d.name for d in spec]
        if len(set(names)) != len(names):
            msg = f"Dimensions {names!r} name one dimension twice. Give each dimension once."
            raise ValueError(msg)
        keys: list[list[Any]] = [[] for _ in names]
        seen: list[set[Any]] = [set() for _ in names]
        cells: dict[tuple[Key, ...], Any] = {}

        def walk(node: Any, level: int, prefix: tuple[Key, ...]) -> None:
            if level == len(names):
                cells[prefix] = node
                return
            if not isinstance(node, Mapping):
                where = _where(names, prefix)
                msg = (
                    f"Array.from_mapping expected a mapping for dimension {names[level]!r}"
                    f"{where}, got {type(node).__name__}. Nest one mapping level per "
                    "dimension, or pass fewer dims."
                )
                raise ValueError(msg)
            for k in node:
                if k not in seen[level]:
                    seen[level].add(k)
                    keys[level].append(k)
                walk(node[k], level + 1, (*prefix, k))

        walk(mapping, 0, ())
        dim_specs: list[Dim] = []
        for i, d in enumerate(spec):
            if isinstance(d, Dim):
                for k in keys[i]:
                    if not isinstance(k, d.key_type) or isinstance(k, bool):
                        msg = (
                            f"Key {k!r} of dimension {d.name!r} is {type(k).__name__}, but the "
                            f"dimension's keys are {d.key_type.__name__}."
                        )
                        raise TypeError(msg)
                dim_specs.append(d)
            else:
                dim_specs.append(Dim(d, _key_type_of(d, keys[i])))
        expected = math.prod(len(k) for k in keys)
        if len(cells) != expected:
            missing = [combo for combo in itertools.product(*keys) if combo not in cells]
            msg = (
                f"Array.from_mapping got a ragged mapping over {names!r}: "
                f"{len(missing)} combination(s) of keys have no value, first "
                f"{_where(names, missing[0]).strip(' ,')}. Arrays are dense: give every "
                "combination a value (use None for a missing one)."
            )
            raise ValueError(msg)
        for key, value in cells.items():
            _check_type(value, value_type, key)
        ordered = {combo: cells[combo] for combo in itertools.product(*keys)}
        return cls(tuple(dim_specs), tuple(tuple(k) for k in keys), ordered, value_type)

    @classmethod
    def from_items(
        cls,
        items: Iterable[tuple[Any, Any]],
        dims: str | Sequence[str | Dim | tuple[str, type]] | tuple[str, Any],
        value_type: Any = Any,
    ) -> Array[Any]:
        """An array from ``(key, value)`` pairs, as ``items()`` gives them back.

        Args:
            items: the cells. A key is a tuple with one key per dimension, a mapping
                ``{dim: key}``, or, for one dimension, the key itself.
            dims: dimension names, ``(name, key type)`` pairs or a dimension string such as
                ``"[prompt: str]"``; or a ``(dims, value_type)`` pair (the array's whole type).
            value_type: the type of the values, checked for each one.

        Raises:
            ValueError: two items have one key, a key has the wrong number of parts, or
                the items leave a combination of keys without a value (arrays are dense).
            TypeError: a value is not of ``value_type``, or a key is not of its dimension's type.
        """
        if isinstance(dims, tuple) and len(dims) == 2 and isinstance(dims[0], str):
            if dims[0].lstrip().startswith("["):  # the (dims, value_type) form
                dims, value_type = dims[0], dims[1]
        spec = as_dims(dims)  # type: ignore[arg-type]
        names = [d if isinstance(d, str) else d.name for d in spec]
        nested: dict[Any, Any] = {}
        count = 0
        for key, value in items:
            full = key_tuple(key, names)
            node = nested
            for k in full[:-1]:
                node = node.setdefault(k, {})
            if not names:
                return cls.scalar(value, value_type)
            if full[-1] in node:
                msg = f"Array.from_items got two items{_where(names, full)}. Give each key once."
                raise ValueError(msg)
            node[full[-1]] = value
            count += 1
        if not count:
            empty = [d if isinstance(d, Dim) else Dim(d, str) for d in spec]
            return cls(tuple(empty), tuple(() for _ in empty), {}, value_type)
        return cls.from_mapping(nested, spec, value_type)

    @classmethod
    def from_cells(
        cls,
        dims: Sequence[Dim],
        keys: Sequence[Sequence[Key]],
        values: Sequence[T],
        value_type: Any = Any,
    ) -> Array[T]:
        """An array from its dimensions, keys per dimension, and values in ``items()`` order."""
        key_tuples = tuple(tuple(k) for k in keys)
        combos = list(itertools.product(*key_tuples))
        if len(combos) != len(values):
            msg = (
                f"Array.from_cells got {len(values)} values for {len(combos)} combinations of keys."
            )
            raise ValueError(msg)
        return cls(tuple(dims), key_tuples, dict(zip(combos, values, strict=True)), value_type)

    # reading --------------------------------------------------------------------------

    @property
    def dims(self) -> tuple[str, ...]:
        """Dimension names, in order."""
        return tuple(d.name for d in self._dims)

    @property
    def dim_specs(self) -> tuple[Dim, ...]:
        """Dimensions with their key types."""
        return self._dims

    @property
    def value_type(self) -> Any:
        """The declared type of the values."""
        return self._value_type

    @property
    def shape(self) -> dict[str, int]:
        """Number of keys per dimension."""
        return {d.name: len(k) for d, k in zip(self._dims, self._keys, strict=True)}

    def keys(self, dim: str | None = None) -> tuple[Any, ...]:
        """The keys of one dimension, in first-seen order; without ``dim``, every cell's key.

        ``keys()`` gives the key tuples in ``items()`` order (``(model, prompt)`` pairs for
        an array over ``[model, prompt]``); ``keys("model")`` the keys of ``model``.
        """
        if dim is None:
            return tuple(self._cells)
        return self._keys[self._dim_index(dim)]

    @property
    def source(self) -> dict[str, Any] | None:
        """Where the array came from when it is a project array's snapshot, else None.

        ``{"array": NAME, "snapshot": N, "digest": SHA256}``: a job given this array keeps
        it in its record (``snapshots``). Derived arrays (``sel``, ``map``) have none.
        """
        return self._source

    def with_source(self, source: dict[str, Any]) -> Array[T]:
        """The same array, marked as coming from ``source`` (see ``source``)."""
        out = Array(self._dims, self._keys, self._cells, self._value_type)
        out._source = dict(source)
        return out

    def items(self) -> Iterator[tuple[tuple[Key, ...], T]]:
        """``(key_tuple, value)`` for every cell, in ``dims`` order (``()`` for a scalar)."""
        return iter(self._cells.items())

    def values(self) -> Iterator[T]:
        """Every value, in ``items()`` order."""
        return iter(self._cells.values())

    def item(self) -> T:
        """The one value of a scalar array.

        Raises:
            ValueError: the array has dimensions.
        """
        if self._dims:
            msg = (
                f"item() needs a scalar array, but this one has dimensions {self.dims!r}. "
                "Select keys first (array[...] or array.sel(...))."
            )
            raise ValueError(msg)
        return self._cells[()]

    def to_dict(self) -> Any:
        """Nested dicts in ``dims`` order (flat for one dim; the value itself for a scalar)."""
        if not self._dims:
            return self._cells[()]
        out: dict[Key, Any] = {}
        for key, value in self._cells.items():
            node = out
            for k in key[:-1]:
                node = node.setdefault(k, {})
            node[key[-1]] = value
        return out

    def __getitem__(self, key: Key | tuple[Key, ...]) -> T:
        """The value at one key per dimension, in ``dims`` order."""
        full = key if isinstance(key, tuple) else (key,)
        if len(full) != len(self._dims):
            msg = (
                f"Array over {self.dims!r} needs {len(self._dims)} key(s), got {full!r}. "
                "Use .sel(dim=key) to select some dimensions only."
            )
            raise KeyError(msg)
        try:
            return self._cells[full]
        except KeyError:
            msg = f"No cell at {full!r} in the array over {self.dims!r}."
            raise KeyError(msg) from None

    def sel(self, **keys: Key) -> Array[T]:
        """The sub-array at the given keys of some dimensions (the others remain)."""
        for dim, key in keys.items():
            i = self._dim_index(dim)
            if key not in self._keys[i]:
                msg = (
                    f"Key {key!r} is not in dimension {dim!r}; its keys are "
                    f"{list(self._keys[i])!r}."
                )
                raise KeyError(msg)
        keep = [i for i, d in enumerate(self._dims) if d.name not in keys]
        pick = [(i, keys[d.name]) for i, d in enumerate(self._dims) if d.name in keys]
        cells = {
            tuple(k[i] for i in keep): v
            for k, v in self._cells.items()
            if all(k[i] == want for i, want in pick)
        }
        return Array(
            tuple(self._dims[i] for i in keep),
            tuple(self._keys[i] for i in keep),
            cells,
            self._value_type,
        )

    def transpose(self, dims: Sequence[str]) -> Array[T]:
        """The same array with its dimensions in another order."""
        order = [self._dim_index(d) for d in dims]
        if sorted(order) != list(range(len(self._dims))):
            msg = f"transpose needs each of {self.dims!r} once, got {list(dims)!r}."
            raise ValueError(msg)
        if order == list(range(len(order))):
            return self
        cells = {tuple(k[i] for i in order): v for k, v in self._cells.items()}
        keys = tuple(self._keys[i] for i in order)
        return Array(
            tuple(self._dims[i] for i in order),
            keys,
            {combo: cells[combo] for combo in itertools.product(*keys)},
            self._value_type,
        )

    def map(self, fn: Any, value_type: Any = Any) -> Array[Any]:
        """A new array with ``fn`` applied to every value."""
        return Array(self._dims, self._keys, {k: fn(v) for k, v in self._cells.items()}, value_type)

    def __len__(self) -> int:
        return len(self._cells)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Array):
            return NotImplemented
        return (
            self._dims == other._dims
            and self._keys == other._keys
            and list(self._cells.values()) == list(other._cells.values())
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        head = f"Array[{type_name(self._value_type)}]{format_dims(self._dims)}"
        if not self._dims:
            return f"{head}({self._cells[()]!r})"
        return f"{head}({self.to_dict()!r})"

    def _dim_index(self, dim: str) -> int:
        for i, d in enumerate(self._dims):
            if d.name == dim:
                return i
        msg = f"Dimension {dim!r} is not in this array; its dimensions are {self.dims!r}."
        raise KeyError(msg)


_ORIGINS: dict[int, tuple[Any, dict[str, Any]]] = {}
"""Values read from a project array's snapshot (``load_cases("array:qa@3")``), by ``id``:
the value (kept, so its ``id`` stays its own) and the snapshot it came from."""


def note_origin(value: Any, source: dict[str, Any]) -> None:
    """Remember that ``value`` was read from the snapshot ``source`` (see ``origin_of``)."""
    _ORIGINS[id(value)] = (value, source)


def origin_of(values: Iterable[Any]) -> dict[str, Any] | None:
    """The snapshot every one of ``values`` was read from, or None (none, or several)."""
    found: dict[str, Any] | None = None
    for value in values:
        known = _ORIGINS.get(id(value))
        if known is None or known[0] is not value or (found is not None and known[1] != found):
            return None
        found = known[1]
    return found


def key_tuple(key: Any, names: Sequence[str]) -> tuple[Any, ...]:
    """One key per dimension, from a tuple, a mapping ``{dim: key}`` or one dimension's key."""
    if isinstance(key, Mapping):
        if set(key) != set(names):
            msg = f"Key {dict(key)!r} names dimensions {sorted(key)!r}, not {list(names)!r}."
            raise ValueError(msg)
        return tuple(key[n] for n in names)
    if isinstance(key, tuple):
        if len(key) != len(names):
            msg = (
                f"Key {key!r} has {len(key)} part(s) for the {len(names)} dimension(s) "
                f"{list(names)!r}. Give one key per dimension."
            )
            raise ValueError(msg)
        return key
    if len(names) != 1:
        msg = (
            f"Key {key!r} is one key, but the array has dimensions {list(names)!r}. Give a "
            "tuple with one key per dimension, or a mapping {dim: key}."
        )
        raise ValueError(msg)
    return (key,)


def _where(names: Sequence[str], key: tuple[Any, ...]) -> str:
    if not key:
        return ""
    return " at " + ", ".join(f"{n}={k!r}" for n, k in zip(names, key, strict=False))


def _check_type(value: Any, value_type: Any, key: tuple[Key, ...]) -> None:
    if value_type is not Any and not check_value(value, value_type):
        where = f" at {key!r}" if key else ""
        msg = (
            f"Array value{where} is {type(value).__name__} {value!r:.80}, not "
            f"{type_name(value_type)}. Convert it, or declare value_type={type_name(type(value))}."
        )
        raise TypeError(msg)


def align_keys(
    inputs: Mapping[str, tuple[tuple[Dim, ...], tuple[tuple[Key, ...], ...]]],
    map_over: Sequence[str],
) -> list[tuple[Key, ...]]:
    """The keys of each mapped dimension, agreed across every input that has it.

    Args:
        inputs: per input name, its dimensions and keys per dimension.
        map_over: the mapped dimensions.

    Returns:
        One tuple of keys per mapped dimension, in the first input's order.

    Raises:
        ValueError: a mapped dimension is in no input, or two inputs disagree on its keys
            (missing keys are never dropped silently).
    """
    result: list[tuple[Key, ...]] = []
    for dim in map_over:
        chosen: tuple[Key, ...] | None = None
        owner = ""
        for name, (dims, keys) in inputs.items():
            for d, k in zip(dims, keys, strict=True):
                if d.name != dim:
                    continue
                if chosen is None:
                    chosen, owner = k, name
                elif set(k) != set(chosen):
                    only_first = [x for x in chosen if x not in set(k)]
                    only_second = [x for x in k if x not in set(chosen)]
                    msg = (
                        f"Inputs {owner!r} and {name!r} disagree on the keys of dimension "
                        f"{dim!r}: only in {owner!r}: {only_first!r}; only in {name!r}: "
                        f"{only_second!r}. Mapped inputs must have the same keys; select the "
                        "common keys first."
                    )
                    raise ValueError(msg)
        if chosen is None:
            msg = (
                f"Dimension {dim!r} is mapped over but no input has it. Map over dimensions "
                "that the inputs have."
            )
            raise ValueError(msg)
        result.append(chosen)
    return result
