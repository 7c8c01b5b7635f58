"""``fxtr cache``: the cache's size, clearing it, an address's history and restoring from it."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from fxtr.store import Store
from fxtr.store._base import entry_key

HISTORY_HELP = """\
List the entries an ADDRESS keeps, newest first: the current one (marked `current`), then
the others, each numbered as `fxtr cache restore --index` takes it, and what changed from
each entry to the next newer one: the step's inputs (by name and field path, such as
case.target), its code (`code of STEP`), its version, a mock model's reply (`code of
mock/NAME`), and the fingerprint that the cache keys on. An address keeps up to
--fxtr-cache-keep entries (default 20), one per fingerprint: a run whose fingerprint is any
of them is served from it and makes it current; past the limit, the entry that was current
longest ago goes.
"""

RESTORE_HELP = """\
Make a kept entry of ADDRESS its current cache entry again; the entry it replaces stays
kept, so a restore can itself be undone. ADDRESS is a step invocation's address as
`fxtr show -v JOB` and the viewer print it (quote it in the shell: it has brackets), e.g.
'qa.evaluate/answer[model=a,prompt=p1]'. --index picks the entry, as
`fxtr cache history ADDRESS` numbers them: 0 is the oldest, -1 (the default) the newest
(the one that was current last before the current one).
"""


def _stamp(value: Any) -> str:
    if not isinstance(value, int | float):
        return "?"
    return dt.datetime.fromtimestamp(value).isoformat(sep=" ", timespec="seconds")


def entry_changes(store: Store, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two entries of one address, in words (empty: nothing).

    Inputs by name and field path (``case.target``), as ``fxtr cache why`` names them.
    """
    from fxtr.experiment._why import input_parts

    changes = input_parts(store, before.get("inputs") or {}, after.get("inputs") or {})
    if before.get("source") != after.get("source"):
        changes.append(f"code of {after.get('step')}")
    for name in sorted(set(before.get("code") or {}) | set(after.get("code") or {})):
        if (before.get("code") or {}).get(name) != (after.get("code") or {}).get(name):
            changes.append(f"code of {name}")
    if before.get("version") != after.get("version"):
        changes.append(f"version {before.get('version')!r} → {after.get('version')!r}")
    if before.get("step") != after.get("step"):
        changes.append(f"step {before.get('step')!r} → {after.get('step')!r}")
    if before.get("result") != after.get("result"):
        changes.append("result differs")
    if not changes and before.get("fingerprint") != after.get("fingerprint"):
        changes.append("fingerprint changed")
    return changes


def history_lines(store: Store, address: str) -> list[str]:
    """The lines of ``fxtr cache history ADDRESS``: newest first, the current one marked.

    Raises:
        KeyError: the address has no entry.
    """
    history = store.history(address)
    current = store.get_entry(address)
    if current is None and not history:
        msg = (
            f"no cache entry at {address!r} in {store.path}. Addresses are as "
            "`fxtr show -v JOB` lists them (every invocation's), and so does the viewer."
        )
        raise KeyError(msg)
    entries: list[tuple[str, dict[str, Any]]] = [(f"[{i}]", h) for i, h in enumerate(history)]
    if current is not None:
        entries.append(("[current]", current.as_dict()))
    entries.reverse()
    lines = []
    for n, (label, entry) in enumerate(entries):
        lines.append(
            f"{label} {str(entry.get('fingerprint'))[:16]} · step {entry.get('step')} · "
            f"version {entry.get('version')} · job {entry.get('job_id')} · "
            f"{_stamp(entry.get('created_at'))}"
        )
        if n + 1 < len(entries):
            changes = entry_changes(store, entries[n + 1][1], entry)
            lines.append(
                "    changed from the next: " + ("; ".join(changes) if changes else "nothing")
            )
    if current is None:
        lines.insert(0, "(no current entry)")
    return lines


WHY_HELP = """\
Say why ADDRESS was not served from the cache in the newest job that reached it: whether
that invocation awaits review, ran, or was served, and what differs between the inputs it
asked for and the entry it found (in review) or replaced (when it ran): each input by name
and, inside an entity, by field path (case.target, scorer.template), `code of STEP` when the
step's code changed, `version of STEP`, or `code of mock/NAME` when a mock model's reply
changed. A run with --fxtr-explain-misses prints the same for every step of a job.
"""


def newest_invocation(store: Store, address: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The newest job whose record has an invocation at ``address``, and that invocation."""
    jobs = [
        job
        for job in store.iter_jobs()
        if address.startswith(str(job.get("root") or job.get("workflow")) + "/")
    ]
    jobs.sort(key=lambda job: job.get("created_at") or 0, reverse=True)
    for job in jobs:
        inv = store.job_invocations(job["job_id"]).get(address)
        if inv is not None:
            return job, inv
    return None


def _entry_label(store: Store, address: str, key: str | None) -> str:
    current = store.get_entry(address)
    found: dict[str, Any] | None = None
    if current is not None and (key is None or current.key == key):
        found, where = current.as_dict(), "current"
    else:
        for entry in store.history(address):
            fp, code = entry.get("fingerprint"), entry.get("code")
            if key is not None and entry_key(str(fp), code) == key:
                found, where = entry, "kept"
    if found is None:
        return f"entry {str(key)[:16]} (no longer kept)"
    return (
        f"the {where} entry {str(found.get('fingerprint'))[:16]} (job {found.get('job_id')}, "
        f"{_stamp(found.get('created_at'))})"
    )


def why_lines(store: Store, address: str) -> list[str]:
    """The lines of ``fxtr cache why ADDRESS``.

    Raises:
        KeyError: no entry and no recorded invocation at the address.
    """
    from fxtr.experiment._why import DAMAGED, DAMAGED_KEPT

    newest = newest_invocation(store, address)
    if newest is None:
        if store.get_entry(address) is None:
            msg = (
                f"no cache entry and no job's invocation at {address!r} in {store.path}. "
                "Addresses are as `fxtr show -v JOB` prints them."
            )
            raise KeyError(msg)
        return [address, "  no job in the store recorded an invocation here"]
    job, inv = newest
    lines = [
        address,
        f"  newest job {job['job_id']} (attempt {inv.get('attempt')}, "
        f"{_stamp(job.get('created_at'))}), step {inv.get('step')}:",
    ]
    changed = inv.get("changed") or (inv.get("conflict") or {}).get("changed") or []
    if inv.get("status") == "needs_review":
        if not changed:  # recorded before fxtr named the parts: compare the inputs at least
            current = store.get_entry(address)
            if current is not None:
                from fxtr.experiment._why import input_parts

                old = current.meta.get("inputs") or {}
                changed = input_parts(store, old, inv.get("input_fingerprints") or {}) or [
                    f"code or version of {inv.get('step')}"
                ]
        lines.append(
            "  awaits review: what it asked for differs from "
            + _entry_label(store, address, inv.get("found"))
            + " in:"
        )
    elif inv.get("from_cache"):
        return [*lines, "  served from the cache: nothing differed"]
    elif not inv.get("started_at"):
        return [*lines, f"  {inv.get('status')}: {inv.get('error')}"]
    elif damaged := [p for p in changed if p in (DAMAGED, DAMAGED_KEPT)]:
        return [*lines, f"  ran because {damaged[0]}"]
    elif changed:
        lines.append(
            "  ran because what it asked for differs from "
            + _entry_label(store, address, inv.get("found"))
            + " in:"
        )
    else:
        return [*lines, "  ran because the address held no entry (it was new)"]
    return lines + [f"    {part}" for part in changed]


def run_cache(args: argparse.Namespace, store: Store, error: type[Exception]) -> int:
    """``fxtr cache [stats|clear|history|why|restore]``; ``error`` is the command's error.

    Raises:
        Exception: ``error``, for a bad address or clearing without confirmation.
    """
    action = getattr(args, "action", None) or "stats"
    if action == "stats":
        volume = store.volume()
        print(f"store {volume.pop('path')} · {volume.pop('bytes') / 1e6:.1f} MB")
        for name, count in volume.items():
            print(f"  {name}: {count}")
        return 0
    if action == "clear":
        count = sum(1 for _ in store.iter_entries())
        if not args.yes:
            if not sys.stdin or not sys.stdin.isatty():
                msg = f"refusing to clear {count} cache entries without confirmation; pass --yes."
                raise error(msg)
            answer = input(f"Clear {count} cache entries in {store.path}? Job records stay. [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing cleared")
                return 1
        print(f"cleared {store.clear_cache()} cache entries")
        return 0
    try:
        if action in ("why", "history"):
            lines = (why_lines if action == "why" else history_lines)(store, args.address)
            print("\n".join(lines))
            return 0
        entry = store.restore(args.address, args.index)
    except KeyError as exc:
        raise error(str(exc.args[0])) from None
    print(
        f"restored {args.address} to {entry['fingerprint'][:16]} (the entry it replaces stays kept)"
    )
    return 0


def add_cache_parser(sub: Any, common: argparse.ArgumentParser, run: Any) -> None:
    """The ``cache`` command and its actions."""
    p = sub.add_parser(
        "cache",
        parents=[common],
        help="cache size; clear, history, restore, why",
        description="The step cache: its size (the default), clearing it, an address's "
        "entries, restoring one, and why an address was not served from it.",
    )
    p.set_defaults(run=run, action="stats")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.add_parser("stats", parents=[common], help="entries and size (the default)")
    a = actions.add_parser("clear", parents=[common], help="remove every cache entry")
    a.add_argument("--yes", action="store_true", help="clear without asking")
    raw = argparse.RawDescriptionHelpFormatter
    for name, text, doc in (
        ("history", "an address's entries and what changed between them", HISTORY_HELP),
        ("why", "why an address was not served from the cache: what changed", WHY_HELP),
    ):
        a = actions.add_parser(
            name, parents=[common], help=text, description=doc, formatter_class=raw
        )
        a.add_argument("address", metavar="ADDRESS", help="a step invocation's address")
    a = actions.add_parser(
        "restore",
        parents=[common],
        help="make a kept entry of an address current again",
        description=RESTORE_HELP,
        formatter_class=raw,
    )
    a.add_argument(
        "address",
        metavar="ADDRESS",
        help="a step invocation's address, e.g. 'qa.evaluate/answer[model=a,prompt=p1]'",
    )
    a.add_argument(
        "--index",
        type=int,
        default=-1,
        help="which kept entry: 0 the oldest, -1 the newest (default), as "
        "`fxtr cache history ADDRESS` numbers them",
    )
