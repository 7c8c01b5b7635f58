"""What the viewer and the summary show of a trajectory's sandbox, read from the record.

The viewer: each sandbox call's commands with their output (stdout, stderr, exit code, cut,
timed out), the layer it made as a diff (text files as unified diffs, binaries by size), and
the final tree. The summary: per model, the sandbox calls that timed out or failed.
"""

from __future__ import annotations

import difflib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from fxtr.agents._report import TRAJECTORY_STEP, load_trajectory, loose, trajectory_model
from fxtr.sandbox._files import manifest_from

CALL_STEP = "fxtr.sandbox.call"
SETUP_STEP = "fxtr.sandbox.setup"
TEXT_LIMIT = 65536
"""Bytes of a file (either side of a diff, or in the final tree) the viewer shows as text."""
FINAL_FILES = 400
"""Files of the final tree whose contents the viewer reads (sizes and text); past this, paths."""


def _mode(value: str) -> tuple[int, str]:
    mode, _, digest = value.partition(":")
    return int(mode, 8), digest


def _kind(mode: int) -> str:
    kind = mode & 0o170000
    return {0o040000: "dir", 0o120000: "symlink"}.get(kind, "file")


def read_manifest(store: Any, tree: str) -> dict[str, str] | None:
    """The manifest of the tree ``tree`` from the store's parts (``None`` if it is missing)."""
    try:
        return manifest_from(tree, store.get_blobs)
    except (LookupError, ValueError, TypeError):
        return None


def read_tree(store: Any, tree: str) -> dict[str, bytes]:
    """The files of the tree ``tree``, from the store's parts alone (symlinks: their target).

    Raises:
        LookupError: the store lacks the manifest or a file's bytes.
    """
    manifest = read_manifest(store, tree)
    if manifest is None:
        msg = f"The store has no sandbox tree {tree[:12]}."
        raise LookupError(msg)
    digests = {p: _mode(v)[1] for p, v in manifest.items() if _mode(v)[1]}
    parts = store.get_blobs(set(digests.values()))
    lost = sorted(p for p, d in digests.items() if d not in parts)
    if lost:
        msg = f"The store lacks the bytes of {len(lost)} file(s) of tree {tree[:12]}: {lost[0]}."
        raise LookupError(msg)
    return {p: parts[d] for p, d in digests.items()}


def _text(data: bytes | None) -> str | None:
    """``data`` as text, or ``None`` for a binary (a NUL byte, or not UTF-8)."""
    if data is None or b"\0" in data[:8192]:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def file_diff(path: str, before: bytes | None, after: bytes | None) -> dict[str, Any]:
    """One file's change: a unified diff of its text, or its sizes when it is binary."""
    out: dict[str, Any] = {
        "size_before": None if before is None else len(before),
        "size_after": None if after is None else len(after),
    }
    a = "" if before is None else _text(before)
    b = "" if after is None else _text(after)
    too_big = max(len(before or b""), len(after or b"")) > TEXT_LIMIT
    if a is None or b is None or too_big:
        out["binary"] = True
        return out
    lines = difflib.unified_diff(
        a.splitlines(keepends=True),
        b.splitlines(keepends=True),
        "/dev/null" if before is None else f"a/{path}",
        "/dev/null" if after is None else f"b/{path}",
    )
    out["diff"] = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return out


def layer_view(store: Any, layer: Mapping[str, Any]) -> dict[str, Any]:
    """A layer as the viewer draws it: each file added, changed or deleted, with its diff."""
    before = read_manifest(store, str(layer.get("before"))) or {}
    added = layer.get("added") or {}
    changed = layer.get("changed") or {}
    deleted = layer.get("deleted") or []
    entries: list[tuple[str, str, str | None, str | None]]
    entries = [(p, "added", None, v) for p, v in added.items()]
    entries += [(p, "changed", before.get(p), v) for p, v in changed.items()]
    entries += [(p, "deleted", before.get(p), None) for p in deleted]
    digests = [_mode(v)[1] for _, _, old, new in entries for v in (old, new) if v]
    parts = store.get_blobs([d for d in dict.fromkeys(digests) if d])
    files = []
    for path, kind, old, new in sorted(entries):
        old_mode, old_digest = _mode(old) if old else (0, "")
        new_mode, new_digest = _mode(new) if new else (0, "")
        item: dict[str, Any] = {"path": path, "change": kind, "type": _kind(new_mode or old_mode)}
        if old and new and old_mode != new_mode:
            item["mode"] = f"{old_mode & 0o7777:o} → {new_mode & 0o7777:o}"
        if item["type"] == "file" and old_digest != new_digest:
            item.update(
                file_diff(
                    path,
                    parts.get(old_digest) if old else None,
                    parts.get(new_digest) if new else None,
                )
            )
        elif item["type"] == "symlink":
            item["target"] = (parts.get(new_digest) or b"").decode(errors="replace")
        files.append(item)
    return {"files": files, "before": layer.get("before"), "after": layer.get("after")}


def tree_view(store: Any, tree: str) -> dict[str, Any]:
    """The final tree: each path with its type, mode and (for the first files) size and text."""
    manifest = read_manifest(store, tree)
    if manifest is None:
        return {"tree": tree, "missing": True, "files": []}
    files = sorted(manifest.items())
    wanted = [_mode(v)[1] for _, v in files if _kind(_mode(v)[0]) != "dir"][:FINAL_FILES]
    parts = store.get_blobs([d for d in dict.fromkeys(wanted) if d])
    out = []
    for path, value in files:
        mode, digest = _mode(value)
        item: dict[str, Any] = {"path": path, "type": _kind(mode), "mode": f"{mode & 0o7777:o}"}
        data = parts.get(digest) if digest else None
        if data is not None:
            item["size"] = len(data)
            text = _text(data) if len(data) <= TEXT_LIMIT else None
            if item["type"] == "symlink":
                item["target"] = data.decode(errors="replace")
            elif text is not None:
                item["text"] = text
        out.append(item)
    return {"tree": tree, "files": out}


def _call_key(address: str) -> str:
    return address.rsplit("/", 1)[0]


def sandbox_views(
    store: Any, trajectories: list[dict[str, Any]], invocations: Mapping[str, Any]
) -> None:
    """Give each trajectory view of a sandbox agent its ``sandbox``: calls, layers, final tree.

    ``trajectories`` are the viewer's trajectory views (each with its ``address``); a view
    whose trajectory had no sandbox is left as it is.
    """
    if not any(str(inv.get("step")).startswith("fxtr.sandbox.") for inv in invocations.values()):
        return
    calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for address, inv in invocations.items():
        if inv.get("step") == CALL_STEP:
            calls[_call_key(address)].append(inv)
    for view in trajectories:
        inv = invocations.get(view.get("address", "")) or {}
        trajectory = load_trajectory(store, inv.get("result_text"))
        state = (trajectory or {}).get("sandbox")
        if not isinstance(state, dict):
            continue
        settings = state.get("sandbox") or {}
        by_call: dict[str, Any] = {}
        for call in calls.get(_call_key(view["address"]), []):
            outcome = _load(store, call.get("result_text"))
            if outcome is None:
                continue
            result = outcome.get("result") or {}
            by_call[str(result.get("tool_call_id"))] = {
                "commands": [_command(c) for c in outcome.get("commands") or []],
                "seconds": outcome.get("seconds"),
                "layer": layer_view(store, outcome.get("layer") or {}),
            }
        view["sandbox"] = {
            "backend": settings.get("backend"),
            "timeout": settings.get("timeout"),
            "start": state.get("start"),
            "tree": state.get("tree"),
            "calls": by_call,
            "final": tree_view(store, str(state.get("tree"))),
        }


def _load(store: Any, text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = loose(json.loads(text), store)
    except (LookupError, TypeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _command(c: Mapping[str, Any]) -> dict[str, Any]:
    argv = [str(a) for a in c.get("argv") or []]
    if len(argv) >= 3 and argv[1] == "-c" and "\n" in argv[2]:
        argv[2] = "…"  # a program (records before the editor was named): the call says what
    return {
        "argv": argv,
        "exit_code": c.get("exit_code"),
        "timed_out": bool(c.get("timed_out")),
        "stopped": c.get("stopped"),
        "cut": c.get("cut", 0),
        "seconds": c.get("seconds"),
        "stdout": c.get("stdout", ""),
        "stderr": c.get("stderr", ""),
    }


def sandbox_rows(store: Any, invocations: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per model: sandbox calls, the ones that timed out or failed, failed sandbox steps.

    ``errors`` counts calls whose result is an error (a non-zero exit, a limit, a refused
    edit), timeouts included; ``failed`` the sandbox steps that raised (the sandbox could not
    start: nothing cached). Empty when the job ran no sandbox.
    """
    rows: dict[str, dict[str, Any]] = {}

    def row(address: str) -> dict[str, Any]:
        model = trajectory_model(address)
        return rows.setdefault(
            model,
            {"model": model, "calls": 0, "timeouts": 0, "errors": 0, "failed": 0, "backends": []},
        )

    for inv in invocations:
        step = inv.get("step")
        if step in (CALL_STEP, SETUP_STEP) and inv.get("status") == "failed":
            row(inv["address"])["failed"] += 1
        elif step == CALL_STEP and inv.get("status") == "succeeded":
            outcome = _load(store, inv.get("result_text"))
            if outcome is None:
                continue
            r = row(inv["address"])
            r["calls"] += 1
            commands = outcome.get("commands") or []
            r["timeouts"] += any(c.get("timed_out") for c in commands)
            r["errors"] += bool((outcome.get("result") or {}).get("is_error"))
        elif step == TRAJECTORY_STEP and inv.get("status") == "succeeded":
            state = (load_trajectory(store, inv.get("result_text")) or {}).get("sandbox")
            if isinstance(state, dict):
                backend = str((state.get("sandbox") or {}).get("backend"))
                found = row(inv["address"])["backends"]
                if backend not in found:
                    found.append(backend)
    return [rows[m] for m in sorted(rows)]
