"""Project arrays: named, typed arrays kept in the store, edited by rows, frozen into snapshots.

A dataset you curate over time lives in the project store (the directory or the PostgreSQL
database every job uses) under a name. You edit it by rows (``upsert``, ``delete``,
``replace``) and freeze it into numbered snapshots whose rows never change; a job takes a
snapshot as an ordinary input, and its record keeps the snapshot's name, number and digest::

    from fxtr.arrays import open_array

    qa = open_array(".fxtr", "qa", dims="[case: str]", value_type=dict)
    qa.upsert({"capital-fr": {"input": "Capital of France?", "target": "Paris"}})
    snap = qa.snapshot()          # Snapshot qa@1
    run(evaluate, {"cases": snap})  # or snap.array(), or load_cases("array:qa@1")

``get_snapshot(store, "qa@1")`` (or ``"qa@latest"``) finds one again; ``fxtr arrays list |
show | snapshot | diff`` do the same from the command line.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from fxtr.experiment import Array, FxtrError
from fxtr.experiment._array import as_dims, key_tuple, note_origin
from fxtr.experiment._encoding import EncodingError, decode_text, encode_text, fingerprint_text
from fxtr.experiment._types import Dim, check_value, format_dims, type_name
from fxtr.store import open_store
from fxtr.store._projects import project_tables

__all__ = [
    "ArrayInfo",
    "ProjectArray",
    "ProjectArrayError",
    "Snapshot",
    "SnapshotDiff",
    "default_store",
    "diff",
    "drop_array",
    "get_snapshot",
    "list_arrays",
    "open_array",
    "parse_ref",
    "use_store",
]

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_REF = re.compile(r"^(?P<name>[^@\s]+)(?:@(?P<number>\d+|latest))?$")


class ProjectArrayError(FxtrError, KeyError):
    """A project array or snapshot that is not there, or does not fit: names it and the fix."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


@dataclasses.dataclass(frozen=True)
class ArrayInfo:
    """What the store holds about one project array."""

    name: str
    dims: tuple[Dim, ...]
    value_type: str
    """The value type's name, as ``open_array`` declared it (``dict``, ``Case``, ...)."""
    version: int
    """Raised by every edit that changed a row; 0 when created (when made again after
    ``drop_array``, one past the version of its newest kept snapshot)."""
    rows: int
    snapshots: int
    created_at: float
    updated_at: float


_DEFAULT_STORE: list[Any] = []


def use_store(location: Any) -> None:
    """Make ``location`` the store ``load_cases("array:...")`` reads by default.

    The pytest plugin calls it with the run's store (``--fxtr-store``, ``--fxtr-cache-dir``).
    """
    _DEFAULT_STORE[:] = [location]


def default_store() -> Any:
    """The store set by ``use_store``, else the nearest ``.fxtr`` of the working directory.

    Raises:
        ProjectArrayError: neither is there.
    """
    if _DEFAULT_STORE:
        return _DEFAULT_STORE[0]
    from pathlib import Path

    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / ".fxtr").is_dir():
            return folder / ".fxtr"
    msg = (
        f"No fxtr store in {here} or its parents (looked for a .fxtr folder) to read project "
        "arrays from. Pass store= (a directory or a postgresql:// URL)."
    )
    raise ProjectArrayError(msg)


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``"qa@3"`` -> ``("qa", 3)``; ``"qa"`` and ``"qa@latest"`` -> ``("qa", None)``.

    Raises:
        ValueError: the text is not ``NAME``, ``NAME@N`` or ``NAME@latest``.
    """
    match = _REF.match(ref.strip()) if isinstance(ref, str) else None
    if match is None:
        msg = f"{ref!r} is not a snapshot: write NAME@N (qa@3), NAME@latest or NAME."
        raise ValueError(msg)
    number = match.group("number")
    return match.group("name"), None if number in (None, "latest") else int(number)


def _dims_text(dims: tuple[Dim, ...]) -> str:
    return json.dumps([[d.name, d.key_type.__name__] for d in dims])


def _dims_of(text: str) -> tuple[Dim, ...]:
    return tuple(Dim(n, {"str": str, "int": int}[t]) for n, t in json.loads(text))


def _type_label(value_type: Any) -> str:
    return type_name(value_type)


def open_array(store: Any, name: str, *, dims: Any = None, value_type: Any = None) -> ProjectArray:
    """The project array ``name`` in ``store``, created when it is not there.

    Args:
        store: a store directory, a ``postgresql://`` URL, or an open store.
        name: letters, digits, ``_``, ``.`` and ``-``.
        dims: its dimensions (``"[case: str]"``, names, or ``(name, type)`` pairs); needed
            to create it; when given for an existing array, they must be its own.
        value_type: the type of its values (default ``Any`` when created), checked on every
            upsert; when given for an existing array, its name must be the declared one's.

    Raises:
        ProjectArrayError: the array is not there and ``dims`` is not given, or ``dims`` or
            ``value_type`` differ from the stored array's.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        msg = (
            f"{name!r} cannot name a project array: use letters, digits, '_', '.' and '-' "
            "(for example 'qa' or 'qa.hard')."
        )
        raise ValueError(msg)
    st = open_store(store)
    tables = project_tables(st)
    found = tables.get(name)
    if found is None:
        if dims is None:
            msg = (
                f"The store at {st.path} has no project array {name!r}. Create it with "
                f"open_array(store, {name!r}, dims='[key: str]', value_type=...)."
            )
            raise ProjectArrayError(msg)
        spec = _dims_spec(dims)
        if not spec:
            msg = f"Project array {name!r} needs at least one dimension, to key its rows by."
            raise ValueError(msg)
        vt = Any if value_type is None else value_type
        found = tables.create(name, _dims_text(spec), _type_label(vt))
    stored_dims = _dims_of(found["dims"])
    if dims is not None:
        given = _dims_spec(dims)
        if given != stored_dims:
            msg = (
                f"Project array {name!r} has dimensions {format_dims(stored_dims)}, not "
                f"{format_dims(given)}. Open it without dims=, or use another name."
            )
            raise ProjectArrayError(msg)
    if value_type is not None and _type_label(value_type) != found["value_type"]:
        msg = (
            f"Project array {name!r} holds {found['value_type']} values, not "
            f"{_type_label(value_type)}. Open it with value_type of that type, or use another "
            "name."
        )
        raise ProjectArrayError(msg)
    return ProjectArray(st, name, stored_dims, Any if value_type is None else value_type)


def list_arrays(store: Any) -> list[ArrayInfo]:
    """Every project array in the store, by name."""
    return [_info(row) for row in project_tables(open_store(store)).all_arrays()]


def drop_array(store: Any, name: str) -> bool:
    """Remove a project array and its rows; whether there was one.

    Its snapshots stay (jobs' records name them, and ``get_snapshot`` still reads them); an
    array created again under the name numbers its snapshots on from the last one.
    """
    return project_tables(open_store(store)).drop(name)


def _info(row: dict[str, Any]) -> ArrayInfo:
    return ArrayInfo(
        name=row["name"],
        dims=_dims_of(row["dims"]),
        value_type=row["value_type"],
        version=row["version"],
        rows=row["rows"],
        snapshots=row.get("snapshots", 0),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def get_snapshot(store: Any, ref: str, *, value_type: Any = None) -> Snapshot:
    """The snapshot ``ref`` names: ``"qa@3"``, or ``"qa@latest"`` / ``"qa"`` for the newest.

    Raises:
        ProjectArrayError: no such array, or no such snapshot of it (the message lists the
            numbers there are).
    """
    name, number = parse_ref(ref)
    st = open_store(store)
    tables = project_tables(st)
    found = tables.snapshot_content(name, number)
    if found is None:
        if tables.get(name) is None:
            msg = f"The store at {st.path} has no project array {name!r} (fxtr arrays list)."
            raise ProjectArrayError(msg)
        numbers = [s["number"] for s in tables.snapshots(name)]
        have = (
            f"its snapshots are {', '.join(map(str, numbers))}"
            if numbers
            else "it has no snapshot yet"
        )
        msg = (
            f"Project array {name!r} has no snapshot {ref!r}: {have}. Take one with "
            f"fxtr arrays snapshot {name} (or ProjectArray.snapshot())."
        )
        raise ProjectArrayError(msg)
    info, content = found
    return Snapshot(info, content, Any if value_type is None else value_type)


class ProjectArray:
    """A project array in a store: edit its rows, take snapshots. Made by ``open_array``.

    A row is a key (a tuple with one key per dimension, a mapping ``{dim: key}``, or, for
    one dimension, the key itself) and a value of the array's value type. Rows keep the order
    their keys were first added in.
    """

    def __init__(self, store: Any, name: str, dims: tuple[Dim, ...], value_type: Any) -> None:
        self.store = store
        self.name = name
        self.dims = dims
        self.value_type = value_type
        self._tables = project_tables(store)

    def __repr__(self) -> str:
        shown = f"{format_dims(self.dims)}, {type_name(self.value_type)}"
        return f"ProjectArray({self.name!r}, {shown})"

    # rows ---------------------------------------------------------------------------------

    def _key_text(self, key: Any) -> str:
        names = [d.name for d in self.dims]
        full = key_tuple(key, names)
        for d, k in zip(self.dims, full, strict=True):
            if not isinstance(k, d.key_type) or isinstance(k, bool):
                msg = (
                    f"Key {k!r} of dimension {d.name!r} of project array {self.name!r} is "
                    f"{type(k).__name__}, but its keys are {d.key_type.__name__}."
                )
                raise TypeError(msg)
        return json.dumps(list(full), ensure_ascii=False)

    def _value_text(self, key: Any, value: Any) -> str:
        if not check_value(value, self.value_type):
            msg = (
                f"The value at {key!r} is {type(value).__name__} {value!r:.60}, but project "
                f"array {self.name!r} holds {type_name(self.value_type)} values. Convert it."
            )
            raise TypeError(msg)
        try:
            return encode_text(value)
        except EncodingError as exc:
            msg = f"The value at {key!r} cannot be stored in project array {self.name!r}: {exc}"
            raise TypeError(msg) from None

    def _texts(self, rows: Any) -> list[tuple[str, str]]:
        if isinstance(rows, Array):
            if set(rows.dims) != {d.name for d in self.dims}:
                msg = (
                    f"An array over {list(rows.dims)!r} cannot be rows of project array "
                    f"{self.name!r} over {[d.name for d in self.dims]!r}."
                )
                raise ValueError(msg)
            order = [rows.dims.index(d.name) for d in self.dims]
            pairs: Iterable[tuple[Any, Any]] = (
                (tuple(k[i] for i in order), v) for k, v in rows.items()
            )
        elif isinstance(rows, Mapping):
            pairs = rows.items()
        else:
            pairs = rows
        out: dict[str, str] = {}
        for key, value in pairs:
            out[self._key_text(key)] = self._value_text(key, value)
        return list(out.items())

    def upsert(self, rows: Any) -> int:
        """Set rows: a mapping ``{key: value}``, ``(key, value)`` pairs, or an ``Array``.

        A new key goes last; an existing key keeps its place. Returns how many rows changed
        (setting a row to the value it has changes nothing).
        """
        return self._tables.edit(self.name, self._texts(rows), (), clear=False)

    def delete(self, keys: Iterable[Any]) -> int:
        """Remove the rows at these keys (keys not there are ignored); how many went."""
        return self._tables.edit(self.name, (), [self._key_text(k) for k in keys], clear=False)

    def replace(self, rows: Any) -> int:
        """Make the rows exactly these (as ``upsert`` takes them); how many rows changed."""
        return self._tables.edit(self.name, self._texts(rows), (), clear=True)

    def rows(self) -> list[tuple[tuple[Any, ...], Any]]:
        """The current rows, ``(key tuple, value)``, in the order their keys were added."""
        return [(tuple(json.loads(k)), decode_text(v)) for k, v in self._tables.rows(self.name)]

    def __len__(self) -> int:
        return len(self._tables.rows(self.name))

    def info(self) -> ArrayInfo:
        """Its row count, version and times as the store has them now."""
        row = self._tables.get(self.name)
        if row is None:
            msg = f"Project array {self.name!r} was removed from the store at {self.store.path}."
            raise ProjectArrayError(msg)
        row["snapshots"] = len(self._tables.snapshots(self.name))
        return _info(row)

    # snapshots ----------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Freeze the current rows into the next numbered snapshot (or the latest, unchanged).

        When the rows are those of the latest snapshot, that snapshot is returned; an edit
        since makes the next number. The rows must fill every combination of keys (arrays
        are dense): a ragged array is refused by name.
        """
        info, _ = self._tables.snapshot(self.name, self._freeze)
        return self.get_snapshot(info["number"])

    def _freeze(self, rows: list[tuple[str, str]]) -> tuple[str, str]:
        items = [(tuple(json.loads(k)), decode_text(v)) for k, v in rows]
        try:
            array = Array.from_items(items, self.dims, self.value_type)
        except ValueError as exc:
            msg = f"Project array {self.name!r} cannot be frozen into a snapshot: {exc}"
            raise ProjectArrayError(msg) from None
        content = encode_text(array)
        return content, fingerprint_text(content)

    def snapshots(self) -> list[Snapshot]:
        """Its snapshots, oldest first."""
        return [
            get_snapshot(self.store, f"{self.name}@{s['number']}", value_type=self.value_type)
            for s in self._tables.snapshots(self.name)
        ]

    def get_snapshot(self, number: int | str = "latest") -> Snapshot:
        """Snapshot ``number`` (or ``"latest"``)."""
        return get_snapshot(self.store, f"{self.name}@{number}", value_type=self.value_type)


class Snapshot:
    """A numbered, frozen state of a project array: its rows never change.

    Pass it (or ``array()``) as a job's input; the job's record keeps ``ref`` and ``digest``
    under ``snapshots``. ``digest`` is the fingerprint of the snapshot's array, the one an
    invocation that takes the whole array has for that input.
    """

    def __init__(self, info: dict[str, Any], content: str, value_type: Any = Any) -> None:
        self.name: str = info["name"]
        self.number: int = info["number"]
        self.digest: str = info["digest"]
        self.version: int = info["version"]
        self.rows: int = info["rows"]
        self.created_at: float = info["created_at"]
        self._content = content
        self._value_type = value_type

    @property
    def ref(self) -> str:
        """``NAME@N``."""
        return f"{self.name}@{self.number}"

    @property
    def source(self) -> dict[str, Any]:
        """What a job's record keeps about it."""
        return {"array": self.name, "snapshot": self.number, "digest": self.digest}

    def __repr__(self) -> str:
        return f"Snapshot({self.ref!r}, rows={self.rows}, digest={self.digest[:12]!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Snapshot):
            return NotImplemented
        return (self.name, self.number, self.digest) == (other.name, other.number, other.digest)

    def __hash__(self) -> int:
        return hash((self.name, self.number, self.digest))

    def array(self) -> Array[Any]:
        """Its rows as an ``Array`` (marked with ``source``, which a job's record keeps)."""
        decoded = decode_text(self._content)
        assert isinstance(decoded, Array)
        cells = list(decoded.values())
        array = Array.from_cells(decoded.dim_specs, decoded._keys, cells, self._value_type)
        if fingerprint_text(encode_text(array)) != self.digest:  # a damaged stored snapshot
            msg = (
                f"Snapshot {self.ref} does not match its digest: the store's copy is damaged. "
                "Restore the store from a backup, or take a new snapshot."
            )
            raise ProjectArrayError(msg)
        return array.with_source(self.source)

    def __fxtr_array__(self) -> Array[Any]:
        """What a job given this snapshot as an input receives (``launch`` calls it)."""
        return self.array()

    def items(self) -> list[tuple[tuple[Any, ...], Any]]:
        """``(key tuple, value)`` for every row, in order."""
        return list(self.array().items())

    def values(self) -> list[Any]:
        """Every row's value, in order (each noted as coming from this snapshot)."""
        out = list(self.array().values())
        for value in out:
            note_origin(value, self.source)
        return out


@dataclasses.dataclass(frozen=True)
class SnapshotDiff:
    """What changed from snapshot ``a`` to snapshot ``b``, by key."""

    a: str
    b: str
    added: list[tuple[Any, ...]]
    removed: list[tuple[Any, ...]]
    changed: list[tuple[Any, ...]]

    @property
    def unchanged(self) -> bool:
        """Whether the two hold the same rows."""
        return not (self.added or self.removed or self.changed)


def diff(a: Snapshot, b: Snapshot) -> SnapshotDiff:
    """The rows added, removed and changed from ``a`` to ``b`` (keys, in ``b``'s order)."""
    old = {k: encode_text(v) for k, v in a.array().items()}
    new = {k: encode_text(v) for k, v in b.array().items()}
    return SnapshotDiff(
        a=a.ref,
        b=b.ref,
        added=[k for k in new if k not in old],
        removed=[k for k in old if k not in new],
        changed=[k for k in new if k in old and old[k] != new[k]],
    )


def _dims_spec(dims: Any) -> tuple[Dim, ...]:
    """Dimensions given as a string or a sequence (names default to str keys)."""
    return tuple(d if isinstance(d, Dim) else Dim(d, str) for d in as_dims(dims))
