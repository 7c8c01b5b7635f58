"""Why an invocation was not served from the cache: what differs from the entry it found.

An entry keeps, beside its combined fingerprint, the fingerprint of each input by name, the
hash of its step's source, its ``version=`` and the digests of the mock models its calls
reached (``CacheEntry.meta``, ``CacheEntry.code``); the store keeps every input's canonical
text by its fingerprint (``Store.get_value``) and every entity's (``Store.get_entity``). So
the difference is named without keeping more: an input by name, inside an entity by field
path (``case.target``, ``scorer.template``), ``code of STEP``, the ``version`` of the step,
or ``code of mock/NAME`` (a mock model's reply). ``_resolution`` puts it in every review's
message and on every invocation that ran at a known address (``Invocation.changed``);
``fxtr cache why`` and ``--fxtr-explain-misses`` print it.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

from fxtr.models._mock import code_changed

if TYPE_CHECKING:
    from fxtr.experiment._definition import StepDefinition
    from fxtr.experiment._engine import Run
    from fxtr.store import CacheEntry, Store

MAX_PARTS = 8
"""Differences named per input at most (the rest are counted)."""

DAMAGED = "the entry was damaged (recomputed)"
"""Why an invocation ran whose address's current entry was damaged."""
DAMAGED_KEPT = (
    "the entry kept for these inputs was damaged (recomputed; the current entry, of other "
    "inputs, stays kept)"
)
"""Why an invocation ran whose inputs the address held in a kept entry that was damaged: the
address held them, so it is no conflict (no review), and the entry is recomputed."""


class Pending:
    """A run's store as ``changed_parts`` reads it: with the values not yet flushed."""

    def __init__(self, run: Run) -> None:
        self.store = run.store
        self.batch = run._batch

    def get_value(self, fp: str) -> str | None:
        """An input's canonical text, queued in this pass or stored."""
        if self.batch is not None and fp in self.batch.values:
            return self.batch.values[fp]
        return self.store.get_value(fp)

    def get_entity(self, entity_id: str) -> str | None:
        """An entity's canonical text, queued in this pass or stored."""
        if self.batch is not None and entity_id in self.batch.entities:
            return self.batch.entities[entity_id]
        return self.store.get_entity(entity_id)


def explain(
    run: Run, step: StepDefinition[..., Any], fps: dict[str, str], entry: CacheEntry
) -> list[str]:
    """``changed_parts`` in a running pass (its queued values, its memo)."""
    return changed_parts(Pending(run), step, fps, entry, run.why_memo)


def changed_parts(
    store: Store | Pending,
    step: StepDefinition[..., Any],
    fps: dict[str, str],
    entry: CacheEntry,
    memo: dict[Any, list[str]] | None = None,
) -> list[str]:
    """What differs between an invocation's inputs and code and a cached entry's.

    Args:
        store: where the inputs' canonical texts are.
        step: the step the invocation runs now (its name, source and version).
        fps: the invocation's input fingerprints by name.
        entry: the entry found at its address.
        memo: differences already computed in this run, by input and fingerprints.
    """
    meta = entry.meta
    parts = input_parts(store, meta.get("inputs") or {}, fps, memo)
    if meta.get("step") not in (None, step.name):
        parts.append(f"step ({meta['step']} → {step.name})")
    elif step.code_counts and meta.get("source") not in (None, step.source_hash):
        parts.append(f"code of {step.name}")
    version = None if step.version is None else str(step.version)
    if entry.version != version:
        parts.append(f"version of {step.name} ({entry.version!r} → {version!r})")
    if entry.code:
        parts += [f"code of {name}" for name in sorted(code_changed(entry.code))]
    return parts or ["the fingerprint (another fxtr's encoding)"]


def review_summary(
    run: Run, step: StepDefinition[..., Any], fps: dict[str, str], entry: CacheEntry
) -> list[str]:
    """What a review's message says differs from the entry, one clause per kind of change.

    ``input(s) NAMES changed (FIELD PATHS)`` for values; ``code of TOOL changed`` for the code
    of a function an input holds (a tool's, a scorer's); ``code of STEP changed (code
    drift)``; ``code of mock/NAME changed (a mock model's reply)``.
    """
    store, memo = Pending(run), run.why_memo
    old = entry.meta.get("inputs") or {}
    names = sorted(n for n in set(fps) | set(old) if fps.get(n) != old.get(n))
    inputs: list[str] = []
    fields: list[str] = []
    codes: list[str] = []
    for name in names:
        parts = input_parts(
            store,
            {name: old[name]} if name in old else {},
            {name: fps[name]} if name in fps else {},
            memo,
        )
        own = [p for p in parts if not p.startswith("code of ")]
        codes += [p for p in parts if p.startswith("code of ")]
        if own or len(own) == len(parts):
            inputs.append(name)
            fields += own
    what = []
    if inputs:
        what.append(f"input(s) {', '.join(inputs)} changed ({', '.join(fields) or 'values'})")
    if codes:
        what.append(f"{', '.join(codes)} changed")
    if step.code_counts and entry.meta.get("source") != step.source_hash:
        what.append(f"code of {step.name} changed (code drift)")
    if entry.code:
        models = [f"code of {name}" for name in sorted(code_changed(entry.code))]
        if models:
            what.append(f"{', '.join(models)} changed (a mock model's reply)")
    return what or ["the fingerprint changed"]


def input_parts(
    store: Store | Pending,
    old: dict[str, str],
    new: dict[str, str],
    memo: dict[Any, list[str]] | None = None,
) -> list[str]:
    """The inputs that differ between two sets of input fingerprints, by field path."""
    parts: list[str] = []
    for name in sorted(set(old) | set(new)):
        if name not in old:
            parts.append(f"{name} (a new input)")
        elif name not in new:
            parts.append(f"{name} (no longer an input)")
        elif old[name] != new[name]:
            key = (name, old[name], new[name])
            found = memo.get(key) if memo is not None else None
            if found is None:
                found = value_parts(store, name, old[name], new[name])
                if memo is not None:
                    memo[key] = found
            parts += found
    return parts


def value_parts(store: Store | Pending, name: str, old_fp: str, new_fp: str) -> list[str]:
    """Where two values of input ``name`` differ (``name`` alone when they cannot be read)."""
    old, new = _tree(store.get_value(old_fp)), _tree(store.get_value(new_fp))
    if old is None or new is None:
        return [name]
    out: list[str] = []
    _diff(store, name, old, new, out)
    if len(out) > MAX_PARTS:
        out = [*out[:MAX_PARTS], f"{name}: {len(out) - MAX_PARTS} more"]
    return out or [name]


def _tree(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _entity(store: Store | Pending, ref: dict[str, Any]) -> Any:
    return _tree(store.get_entity(str(ref.get("id"))))


def _diff(store: Store | Pending, path: str, old: Any, new: Any, out: list[str]) -> None:
    if old == new or len(out) > MAX_PARTS:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        if "$ref" in old and "$ref" in new and old["$ref"] == new["$ref"]:
            a, b = _entity(store, old), _entity(store, new)
            if a is None or b is None:
                out.append(path)
            else:
                _diff(store, path, a, b, out)
            return
        if "$entity" in old and "$entity" in new and old["$entity"] == new["$entity"]:
            _fields(store, path, old.get("v") or {}, new.get("v") or {}, out)
            return
        if "$array" in old and "$array" in new:
            if old["$array"] != new["$array"] or old.get("keys") != new.get("keys"):
                out.append(f"{path} (its keys)")
                return
            combos = itertools.product(*old["keys"])
            for combo, a, b in zip(combos, old["cells"], new["cells"], strict=False):
                _diff(store, f"{path}[{','.join(map(str, combo))}]", a, b, out)
            return
        if not any(k.startswith("$") for k in (*old, *new)):
            _fields(store, path, old, new, out)
            return
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            out.append(f"{path} (length {len(old)} → {len(new)})")
            return
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _diff(store, f"{path}[{i}]", a, b, out)
        return
    out.append(path)


def _fields(
    store: Store | Pending, path: str, old: dict[str, Any], new: dict[str, Any], out: list[str]
) -> None:
    for key in sorted(set(old) | set(new)):
        if key not in old or key not in new:
            out.append(f"{path}.{key}")
        elif key == "code" and isinstance(new.get("path"), str) and old[key] != new[key]:
            out.append(f"code of {new['path']}")  # a tool's (or a scorer's) function
        else:
            _diff(store, f"{path}.{key}", old[key], new[key], out)


def miss_lines(invocations: list[dict[str, Any]], verbose: int = 0) -> list[str]:
    """``--fxtr-explain-misses``: per step, why the invocations that were not cached ran.

    Counts, per step, the invocations that ran because their address held no entry and
    those that ran (or await review) because something at a known address changed, and
    names each changed part with how many invocations it made run (and one of them; every
    one with ``-v``).
    """
    by_step: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for inv in invocations:
        ran = not inv.get("from_cache") and inv.get("started_at")
        if ran or inv.get("status") == "needs_review":
            by_step[inv["step"]].append(inv)
    lines = []
    for step, invs in sorted(by_step.items()):
        ran = [i for i in invs if i.get("status") != "needs_review"]
        new = [i for i in ran if not i.get("changed")]
        changed = [i for i in ran if i.get("changed")]
        review = [i for i in invs if i.get("status") == "needs_review"]
        head = (
            f"{step}: {len(ran)} ran: {len(new)} at a new address, "
            f"{len(changed)} because something at a known address changed"
        )
        if review:
            head += f"; {len(review)} await review"
        lines.append(head)
        parts: Counter[str] = Counter()
        example: dict[str, str] = {}
        for inv in changed + review:
            for part in inv.get("changed") or ["(not recorded)"]:
                parts[part] += 1
                example.setdefault(part, inv["address"])
        for part, count in parts.most_common():
            lines.append(f"    {part}: {count} (e.g. {example[part]})")
            if verbose > 0:
                lines += [
                    f"      {i['address']}"
                    for i in changed + review
                    if part in (i.get("changed") or ["(not recorded)"])
                ]
    return lines
