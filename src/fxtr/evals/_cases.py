"""``Case`` and ``load_cases``: datasets read in the launcher, each case an entity with an id."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import inspect
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fxtr.experiment._entity import Entity


class Case(Entity):
    """One case of an eval: what the model is asked, and what a scorer compares against.

    ``target`` is the expected answer (or several acceptable ones); ``choices`` the options of a
    multiple-choice question (labelled A, B, C, ... in the prompt); ``metadata`` anything else
    (a judge's template can use its keys; ``cluster=`` on the marker can group by one).
    """

    id: str
    input: str
    target: str | list[str] | None = None
    choices: tuple[str, ...] = ()
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __fxtr_id__(self) -> str:
        """The case's id in pytest node ids and as the key of its cell."""
        return self.id

    @property
    def targets(self) -> list[str]:
        """The target as a list (empty when the case has none)."""
        if self.target is None:
            return []
        return [self.target] if isinstance(self.target, str) else list(self.target)


class CaseFileError(ValueError):
    """A dataset that cannot be read: names the file, the line (when there is one) and the fix."""

    def __init__(self, path: Path, line: int | None, problem: str, fix: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}. {fix}")
        self.path = path
        self.line = line


_SLUG = re.compile(r"[a-z0-9]+")


def content_id(input: str, target: Any, choices: Sequence[str], metadata: dict[str, Any]) -> str:
    """A stable id from a case's content: a few words of its input and a hash of the rest.

    The same content gets the same id in every process and after lines are added, removed
    or reordered, so cached results stay at their addresses.
    """
    payload = json.dumps(
        {"input": input, "target": target, "choices": list(choices), "metadata": metadata},
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    digest = hashlib.sha256(payload.encode("utf-8")).hexdigest()[:10]
    words = _SLUG.findall(input.lower())[:4]
    slug = "-".join(words)[:32].strip("-")
    return f"{slug}-{digest}" if slug else digest


def _resolve(path: str | Path, caller: Path | None) -> Path:
    candidate = Path(path)
    if candidate.is_absolute() or candidate.exists() or caller is None:
        return candidate
    for folder in (caller, *caller.parents):
        if (folder / candidate).exists():
            return folder / candidate
    return candidate


def _caller_dir() -> Path | None:
    frame = inspect.currentframe()
    try:
        outer = frame.f_back.f_back if frame and frame.f_back else None
        filename = outer.f_code.co_filename if outer else None
    finally:
        del frame
    if not filename or filename.startswith("<"):
        return None
    return Path(filename).resolve().parent


Row = tuple[int | None, Any]
"""A record and the line it starts on (``None`` when the format has no lines to name)."""


def _jsonl_rows(path: Path, text: str) -> Iterator[Row]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise CaseFileError(
                path,
                number,
                f"not a JSON object ({exc.msg}: column {exc.colno})",
                "Each line of a .jsonl file is one JSON object: fix this line or delete it",
            ) from None


def _json_rows(path: Path, text: str) -> Iterator[Row]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CaseFileError(
            path,
            exc.lineno,
            f"not valid JSON ({exc.msg}: column {exc.colno})",
            "A .json dataset is one JSON list of objects: fix the syntax there",
        ) from None
    if isinstance(data, dict) and isinstance(data.get("cases"), list):
        data = data["cases"]
    if not isinstance(data, list):
        raise CaseFileError(
            path,
            1,
            f"the file holds a JSON {type(data).__name__}, not a list",
            "Write the cases as a JSON list of objects (or use .jsonl, one object a line)",
        )
    starts = _item_lines(text, len(data))
    for index, item in enumerate(data):
        yield starts[index], item


def _item_lines(text: str, count: int) -> list[int | None]:
    """The line each top-level item of a JSON list starts on (best effort)."""
    decoder = json.JSONDecoder()
    lines: list[int | None] = []
    pos = text.index("[") + 1
    for _ in range(count):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        lines.append(text.count("\n", 0, pos) + 1)
        try:
            _, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return lines + [None] * (count - len(lines))
    return lines


def _csv_rows(path: Path, text: str) -> Iterator[Row]:
    reader = csv.DictReader(text.splitlines(keepends=True))
    if not reader.fieldnames:
        return
    width = len(reader.fieldnames)
    start = reader.line_num + 1
    for row in reader:
        if None in row or any(value is None for value in row.values()):
            cells = (
                width + len(row.get(None) or [])
                if None in row
                else sum(v is not None for v in row.values())
            )
            raise CaseFileError(
                path,
                start,
                f"the row has {cells} cells but the header has {width}",
                "Quote cells that contain commas, or fix the number of cells",
            )
        yield start, dict(row)
        start = reader.line_num + 1


_READERS = {".jsonl": _jsonl_rows, ".json": _json_rows, ".csv": _csv_rows}


def load_cases(
    path: str | Path,
    *,
    id: str | None = None,
    input: str = "input",
    target: str | None = "target",
    choices: str | Sequence[str] | None = None,
    metadata: Sequence[str] | None = None,
    store: Any = None,
) -> list[Case]:
    """Read a dataset into cases; call it in the eval module (the launcher), never in a step.

    Args:
        path: a ``.jsonl`` (one JSON object a line), ``.json`` (a list of objects) or ``.csv``
            (a header row) file. A relative path is looked up from the working directory,
            then from the calling module's folder and its parents. Or ``"array:NAME@N"``
            (``@latest``): a project array's snapshot (``fxtr.arrays``) of ``Case`` values
            or of records (dicts), keyed by case id; a job over these cases records the
            snapshot.
        id: the column holding each case's id; ``None`` uses a column ``id`` where a case
            has one, and gives the others a stable id from a hash of their content (a few
            words of the input, then ten hex digits).
        input: the column holding the prompt.
        target: the column holding the expected answer (a string, a list of acceptable
            ones, or a number); ``None`` for cases without targets.
        choices: the column holding a list of choices (in a ``.csv``, a JSON list), or a
            list of columns holding one choice each (``["A", "B", "C", "D"]``).
        metadata: the columns kept in ``Case.metadata``; ``None`` keeps every other column.
        store: where ``"array:..."`` snapshots are read (default: the store pytest runs with,
            else the nearest ``.fxtr`` folder of the working directory or its parents).

    Raises:
        ValueError: the file is missing or has an unknown suffix; a line is malformed; a
            column is missing; two cases have the same id; the file has no cases. The
            message names the file, the line and the fix.
    """
    columns = _Columns(id, input, target, choices, metadata)
    if isinstance(path, str) and path.startswith("array:"):
        return _snapshot_cases(path, columns, store)
    file = _resolve(path, _caller_dir())
    reader = _READERS.get(file.suffix.lower())
    if reader is None:
        raise CaseFileError(
            file,
            None,
            f"unknown dataset suffix {file.suffix!r}",
            "Use .jsonl (one JSON object a line), .json (a list) or .csv (with a header)",
        )
    try:
        text = file.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise CaseFileError(
            file,
            None,
            f"no such file (looked from {Path.cwd()} and the calling module)",
            "Give a path relative to the working directory or to the eval module",
        ) from None
    except UnicodeDecodeError as exc:
        bad_line = exc.object[: exc.start].count(b"\n") + 1
        raise CaseFileError(file, bad_line, "not UTF-8 text", "Save the file as UTF-8") from None
    cases: list[Case] = []
    seen: dict[str, int | None] = {}
    for line, record in reader(file, text):
        case = columns.case(file, line, record)
        if case.id in seen:
            explicit = id is not None or (isinstance(record, dict) and "id" in record)
            raise _duplicate(file, line, seen[case.id], case.id, explicit=explicit)
        seen[case.id] = line
        cases.append(case)
    if not cases:
        raise CaseFileError(file, None, "the file has no cases", "Add at least one case")
    return cases


def _snapshot_cases(ref: str, columns: _Columns, store: Any) -> list[Case]:
    """The cases of a project array's snapshot, each noted as read from it."""
    from fxtr.arrays import default_store, get_snapshot
    from fxtr.experiment._array import note_origin

    snap = get_snapshot(default_store() if store is None else store, ref[len("array:") :])
    where = Path(f"array:{snap.ref}")
    array = snap.array()
    if len(array.dims) != 1:
        raise CaseFileError(
            where,
            None,
            f"the array has dimensions {list(array.dims)!r}, and cases need one (their ids)",
            "Keep cases in a project array over one dimension, such as '[case: str]'",
        )
    cases: list[Case] = []
    for row, ((key,), value) in enumerate(array.items(), start=1):
        if isinstance(value, Case):  # decoded: its tuple of choices came back a list
            case = dataclasses.replace(value, choices=tuple(value.choices))
        else:
            if isinstance(value, dict) and columns.id is None and "id" not in value:
                value = {**value, "id": str(key)}  # the row's key is the case's id
            case = columns.case(where, row, value)
        note_origin(case, snap.source)
        cases.append(case)
    if not cases:
        raise CaseFileError(where, None, "the snapshot has no rows", "Add cases, then snapshot")
    return cases


def _duplicate(
    path: Path, line: int | None, first: int | None, case_id: str, *, explicit: bool
) -> CaseFileError:
    where = f"line {first}" if first is not None else "an earlier case"
    if explicit:
        return CaseFileError(
            path,
            line,
            f"case id {case_id!r} is also the id of {where}",
            "Give every case its own id",
        )
    return CaseFileError(
        path,
        line,
        f"this case has the same content as {where} (id {case_id!r})",
        "Remove the repeated case, or add an id column and pass id=",
    )


@dataclasses.dataclass(frozen=True)
class _Columns:
    """How records map onto cases."""

    id: str | None
    input: str
    target: str | None
    choices: str | Sequence[str] | None
    metadata: Sequence[str] | None

    def used(self) -> set[str]:
        names = {self.input}
        if self.id is not None:
            names.add(self.id)
        if self.target is not None:
            names.add(self.target)
        if isinstance(self.choices, str):
            names.add(self.choices)
        elif self.choices is not None:
            names.update(self.choices)
        return names

    def case(self, path: Path, line: int | None, record: Any) -> Case:
        if not isinstance(record, dict):
            raise CaseFileError(
                path,
                line,
                f"a case must be a JSON object, got {type(record).__name__}",
                'Write it as {"input": ..., "target": ...}',
            )
        prompt = _text(path, line, record, self.input, "input")
        target = self._target(path, line, record)
        choices = self._choices(path, line, record)
        id_column = self.id if self.id is not None or "id" not in record else "id"
        if self.metadata is None:
            used = self.used() | {id_column} if id_column else self.used()
            meta = {k: v for k, v in record.items() if k not in used}
        else:
            meta = {name: _column(path, line, record, name, "metadata") for name in self.metadata}
        if id_column is None:
            case_id = content_id(prompt, target, choices, meta)
        else:
            case_id = _text(path, line, record, id_column, "id")
            if not case_id.strip():
                raise CaseFileError(
                    path, line, f"the id column {id_column!r} is empty", "Give the case an id"
                )
        return Case(id=case_id, input=prompt, target=target, choices=choices, metadata=meta)

    def _target(
        self, path: Path, line: int | None, record: dict[str, Any]
    ) -> str | list[str] | None:
        if self.target is None:
            return None
        value = _column(path, line, record, self.target, "target")
        if isinstance(value, list):
            if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
                raise CaseFileError(
                    path,
                    line,
                    f"the target list {value!r} holds values that are not text",
                    "A target is a string, a number or a list of strings",
                )
            return [str(v) for v in value]
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise CaseFileError(
            path,
            line,
            f"the target {value!r} is a {type(value).__name__}",
            "A target is a string, a number or a list of strings (or pass target=None)",
        )

    def _choices(self, path: Path, line: int | None, record: dict[str, Any]) -> tuple[str, ...]:
        if self.choices is None:
            return ()
        if not isinstance(self.choices, str):
            return tuple(_text(path, line, record, name, "choices") for name in self.choices)
        value = _column(path, line, record, self.choices, "choices")
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                value = None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise CaseFileError(
                path,
                line,
                f"the choices column {self.choices!r} is not a list of strings",
                'Write the choices as a JSON list (["Paris", "Rome"]) or pass choices= a list '
                "of columns",
            )
        return tuple(value)


def _column(path: Path, line: int | None, record: dict[str, Any], name: str, role: str) -> Any:
    if name not in record:
        have = ", ".join(repr(k) for k in record) or "none"
        raise CaseFileError(
            path,
            line,
            f"no column {name!r} (the {role} column; this case has {have})",
            f"Add the column, or pass {role}= the name of the column to use"
            + (" (target=None for cases without targets)" if role == "target" else ""),
        )
    return record[name]


def _text(path: Path, line: int | None, record: dict[str, Any], name: str, role: str) -> str:
    value = _column(path, line, record, name, role)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise CaseFileError(
            path,
            line,
            f"the {role} column {name!r} holds a {type(value).__name__}, not text",
            "Write it as a string",
        )
    return value
