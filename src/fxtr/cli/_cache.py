"""``fxtr cache``: the cache's size, clearing it, an address's history and restoring from it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fxtr.store import Store
from fxtr.store._base import entry_key

HISTORY_HELP = """\
List the entries an ADDRESS keeps, newest first: the current one (marked `current`), then
the others, each numbered as `fxtr cache restore --index` takes it, and what changed from
each entry to the next newer one: the step's inputs (by name), its source code, its version,
and the fingerprint that the cache keys on. An address keeps up to --fxtr-cache-keep entries
(default 20), one per fingerprint: a run whose fingerprint is any of them is served from it
and makes it current; past the limit, the entry that was current longest ago goes.
"""

RESTORE_HELP = """\
Make a kept entry of ADDRESS its current cache entry again; the entry it replaces stays
kept, so a restore can itself be undone. ADDRESS is a step invocation's address as
`fxtr show JOB` and the viewer print it (quote it in the shell: it has brackets), e.g.
'qa.evaluate/answer[model=a,prompt=p1]'. --index picks the entry, as
`fxtr cache history ADDRESS` numbers them: 0 is the oldest, -1 (the default) the newest
(the one that was current last before the current one).
"""


def _stamp(value: Any) -> str:
    if not isinstance(value, int | float):
        return "?"
    return dt.datetime.fromtimestamp(value).isoformat(sep=" ", timespec="seconds")


def entry_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two entries of one address, in words (empty: nothing)."""
    changes = []
    old_inputs = before.get("inputs") or {}
    new_inputs = after.get("inputs") or {}
    for name in sorted(set(old_inputs) | set(new_inputs)):
        if name not in old_inputs:
            changes.append(f"input {name!r} added")
        elif name not in new_inputs:
            changes.append(f"input {name!r} removed")
        elif old_inputs[name] != new_inputs[name]:
            changes.append(
                f"input {name!r} changed ({str(old_inputs[name])[:12]} → "
                f"{str(new_inputs[name])[:12]})"
            )
    if before.get("source") != after.get("source"):
        changes.append("source code changed")
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
            "`fxtr show JOB` prints them."
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
            changes = entry_changes(entries[n + 1][1], entry)
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
    newest = newest_invocation(store, address)
    if newest is None:
        if store.get_entry(address) is None:
            msg = (
                f"no cache entry and no job's invocation at {address!r} in {store.path}. "
                "Addresses are as `fxtr show JOB` prints them."
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
    elif changed:
        lines.append(
            "  ran because what it asked for differs from "
            + _entry_label(store, address, inv.get("found"))
            + " in:"
        )
    else:
        return [*lines, "  ran because the address held no entry (it was new)"]
    return lines + [f"    {part}" for part in changed]
