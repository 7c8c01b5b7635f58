"""``fxtr arrays list | show NAME[@N] | snapshot NAME | diff A B``: project arrays (DESIGN §19)."""

from __future__ import annotations

import argparse
import datetime
import functools
import json
from typing import Any

from fxtr.experiment._encoding import encode_text
from fxtr.experiment._types import format_dims

ROW_WIDTH = 100
"""``show`` cuts a row's value to fit a line of this many columns."""


def add_parser(sub: Any, common: argparse.ArgumentParser, helpers: tuple[Any, ...]) -> None:
    """Register ``fxtr arrays`` on the ``fxtr`` command's subparsers.

    ``helpers`` are the command's ``(open the store, print JSON, error class)``, given so
    that this module needs not import ``fxtr.cli``.
    """
    p = sub.add_parser(
        "arrays",
        parents=[common],
        help="project arrays: list, show, snapshot, diff",
        description="Project arrays are named, typed arrays kept in the store, edited by rows "
        "from Python (fxtr.arrays) and frozen into numbered snapshots whose rows never change; "
        "a job takes a snapshot as an input. A snapshot is NAME@N, or NAME@latest.",
    )
    acts = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = functools.partial(_run, helpers=helpers)

    q = acts.add_parser("list", parents=[common], help="every project array")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(run=run)

    q = acts.add_parser(
        "show",
        parents=[common],
        help="an array's current rows and its snapshots, or a snapshot's rows",
    )
    q.add_argument("ref", metavar="NAME[@N]", help="an array, or one of its snapshots")
    q.add_argument("--limit", type=int, default=50, help="rows shown (default 50; 0: all)")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(run=run)

    q = acts.add_parser(
        "snapshot",
        parents=[common],
        help="freeze an array's rows into its next snapshot (the latest when unchanged)",
    )
    q.add_argument("name", metavar="NAME")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(run=run)

    q = acts.add_parser("diff", parents=[common], help="the rows that differ between snapshots")
    q.add_argument("a", metavar="A", help="NAME@N (or NAME@latest)")
    q.add_argument("b", metavar="B", help="NAME@N (or NAME@latest)")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(run=run)


def _run(args: argparse.Namespace, helpers: tuple[Any, ...]) -> int:
    open_store, print_json, error = helpers
    from fxtr.arrays import ProjectArrayError

    store = open_store(args)
    try:
        return int(_ACTIONS[args.action](args, store, print_json))
    except (ProjectArrayError, ValueError) as exc:
        raise error(str(exc)) from None


def _when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def _key(key: tuple[Any, ...]) -> str:
    return ", ".join(str(k) for k in key)


def _list(args: argparse.Namespace, store: Any, print_json: Any) -> int:
    from tabulate import tabulate

    from fxtr.arrays import list_arrays

    arrays = list_arrays(store)
    if args.json:
        print_json([_info_json(a) for a in arrays])
        return 0
    if not arrays:
        print(f"no project arrays in {store.path} (create one with fxtr.arrays.open_array)")
        return 0
    table = [
        [a.name, format_dims(a.dims), a.value_type, a.rows, a.snapshots, _when(a.updated_at)]
        for a in arrays
    ]
    headers = ["array", "dims", "values", "rows", "snapshots", "edited"]
    print(tabulate(table, headers=headers, disable_numparse=True))
    return 0


def _info_json(info: Any) -> dict[str, Any]:
    return {
        "name": info.name,
        "dims": [[d.name, d.key_type.__name__] for d in info.dims],
        "value_type": info.value_type,
        "version": info.version,
        "rows": info.rows,
        "snapshots": info.snapshots,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
    }


def _rows_lines(rows: list[tuple[tuple[Any, ...], Any]], limit: int) -> list[str]:
    shown = rows if limit <= 0 else rows[:limit]
    lines = []
    for key, value in shown:
        head = f"  {_key(key)}: "
        text = encode_text(value)
        room = max(ROW_WIDTH - len(head), 20)
        lines.append(head + (text if len(text) <= room else text[: room - 1] + "…"))
    if len(shown) < len(rows):
        lines.append(f"  … {len(rows) - len(shown)} more (--limit 0 shows all)")
    return lines


def _show(args: argparse.Namespace, store: Any, print_json: Any) -> int:
    from fxtr.arrays import get_snapshot, open_array

    if "@" in args.ref:
        snap = get_snapshot(store, args.ref)
        rows = snap.items()
        if args.json:
            print_json(_snapshot_json(snap, rows))
            return 0
        print(f"{snap.ref}: {snap.rows} rows, digest {snap.digest}, taken {_when(snap.created_at)}")
        print("\n".join(_rows_lines(rows, args.limit)))
        return 0
    array = open_array(store, args.ref)
    info = array.info()
    rows = array.rows()
    snaps = array.snapshots()
    if args.json:
        out = _info_json(info)
        out["rows"] = [[list(k), json.loads(encode_text(v))] for k, v in rows]
        out["snapshots"] = [_snapshot_json(s, None) for s in snaps]
        print_json(out)
        return 0
    print(
        f"{info.name} {format_dims(info.dims)} of {info.value_type}: {info.rows} rows, "
        f"version {info.version}, edited {_when(info.updated_at)}"
    )
    print("\n".join(_rows_lines(rows, args.limit)))
    if snaps:
        latest = snaps[-1]
        edited = " (edited since)" if latest.version != info.version else ""
        print(f"snapshots: {', '.join(s.ref for s in snaps)}; latest {latest.ref}{edited}")
    else:
        print(f"no snapshots yet (fxtr arrays snapshot {info.name})")
    return 0


def _snapshot_json(snap: Any, rows: list[tuple[tuple[Any, ...], Any]] | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ref": snap.ref,
        "array": snap.name,
        "snapshot": snap.number,
        "digest": snap.digest,
        "rows": snap.rows,
        "created_at": snap.created_at,
    }
    if rows is not None:
        out["items"] = [[list(k), json.loads(encode_text(v))] for k, v in rows]
    return out


def _snapshot(args: argparse.Namespace, store: Any, print_json: Any) -> int:
    from fxtr.arrays import open_array

    array = open_array(store, args.name)
    before = {s.number for s in array.snapshots()}
    snap = array.snapshot()
    new = snap.number not in before
    if args.json:
        print_json({**_snapshot_json(snap, None), "new": new})
        return 0
    if new:
        print(f"{snap.ref}: {snap.rows} rows, digest {snap.digest}")
    else:
        print(f"{snap.ref} already holds the current rows: no new snapshot")
    return 0


def _diff(args: argparse.Namespace, store: Any, print_json: Any) -> int:
    from fxtr.arrays import diff, get_snapshot

    a, b = get_snapshot(store, args.a), get_snapshot(store, args.b)
    d = diff(a, b)
    if args.json:
        print_json(
            {
                "a": d.a,
                "b": d.b,
                "added": [list(k) for k in d.added],
                "removed": [list(k) for k in d.removed],
                "changed": [list(k) for k in d.changed],
            }
        )
        return 0
    if d.unchanged:
        print(f"{d.a} and {d.b} hold the same rows")
        return 0
    for mark, keys in (("+", d.added), ("-", d.removed), ("~", d.changed)):
        for key in keys:
            print(f"{mark} {_key(key)}")
    print(
        f"{d.a} -> {d.b}: {len(d.added)} added, {len(d.removed)} removed, {len(d.changed)} changed"
    )
    return 0


_ACTIONS = {"list": _list, "show": _show, "snapshot": _snapshot, "diff": _diff}
