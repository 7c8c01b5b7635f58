"""``fxtr cache``: the cache's size, clearing it, an address's history and restoring from it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fxtr.store import Store

HISTORY_HELP = """\
List the entries an ADDRESS held, oldest first, then the current one, and what changed from
each entry to the next: the step's inputs (by name), its source code, its version, and the
fingerprint that the cache keys on. An entry goes to the history when a run with
--fxtr-cache-conflict=overwrite (or conflict="overwrite") replaces it, or when a restore puts
another one back.
"""

RESTORE_HELP = """\
Put an entry of ADDRESS's history back as its current cache entry; the entry it replaces goes
to the history, so a restore can itself be undone. ADDRESS is a step invocation's address as
`fxtr show -v JOB` and the viewer print it (quote it in the shell: it has brackets), e.g.
'qa.evaluate/answer[model=a,prompt=p1]'. --index picks the history entry, counted as
`fxtr cache history ADDRESS` numbers them: 0 is the oldest, -1 (the default) the newest.
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
    """The lines of ``fxtr cache history ADDRESS``.

    Raises:
        KeyError: the address has neither an entry nor a history.
    """
    history = store.history(address)
    current = store.get_entry(address)
    if current is None and not history:
        msg = (
            f"no cache entry or history at {address!r} in {store.path}. Addresses are as "
            "`fxtr show -v JOB` lists them (every failure's address), and the viewer shows "
            "each invocation's."
        )
        raise KeyError(msg)
    entries: list[tuple[str, dict[str, Any]]] = [(f"[{i}]", h) for i, h in enumerate(history)]
    if current is not None:
        entries.append(("[current]", current.as_dict()))
    lines = []
    previous: dict[str, Any] | None = None
    for label, entry in entries:
        lines.append(
            f"{label} {str(entry.get('fingerprint'))[:16]} · step {entry.get('step')} · "
            f"version {entry.get('version')} · job {entry.get('job_id')} · "
            f"{_stamp(entry.get('created_at'))}"
        )
        if previous is not None:
            changes = entry_changes(previous, entry)
            lines.append("    changed: " + ("; ".join(changes) if changes else "nothing"))
        previous = entry
    if current is None:
        lines.append("(no current entry)")
    return lines
