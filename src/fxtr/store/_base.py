"""What every store shares: the cache entry's stored form, the batch of writes, claims' liveness.

Both stores (``_diskcache`` and ``_postgres``) import from here and never from each other;
``_factory.open_store`` picks one by location.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from typing import Any

from fxtr.experiment.errors import FxtrError


class StoreError(FxtrError):
    """A store that cannot be opened or read: the message names the path and what to do."""


def is_url(location: Any) -> bool:
    """Whether a store location is a database URL rather than a directory."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def pid_alive(pid: int) -> bool:
    """Whether a process on this host is still running (a claim's holder)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def parse_job(text: Any, where: str) -> dict[str, Any] | None:
    """A job record read back, or None (with a warning) when it is damaged.

    One damaged record must not break listing the others (``fxtr jobs``, the viewer).
    """
    try:
        record = json.loads(text)
    except (TypeError, ValueError) as exc:
        record, problem = None, f"not JSON ({exc})"
    else:
        problem = "not a job record"
    if isinstance(record, dict) and isinstance(record.get("job_id"), str):
        return record
    warnings.warn(
        f"Skipped the damaged job record {where}: {problem}. Remove it, or restore the store "
        "from a backup; the other jobs are listed.",
        RuntimeWarning,
        stacklevel=3,
    )
    return None


class CacheEntry:
    """A step-cache entry: fingerprint, version, usage, result text, and the rest (lazily).

    Stored as five lines so a cache hit reads the fingerprint and the result without
    parsing the metadata: fingerprint, version, usage JSON (or empty), result, metadata JSON.
    """

    __slots__ = ("_meta", "_meta_text", "fingerprint", "result", "usage", "version")

    def __init__(
        self,
        fingerprint: str,
        version: str | None,
        result: str,
        usage: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        meta_text: str | None = None,
    ) -> None:
        self.fingerprint = fingerprint
        self.version = version
        self.result = result
        """Canonical text of the result."""
        self.usage = usage
        """Model calls the step made when it ran: calls, tokens, dollars (None: none)."""
        self._meta = meta
        self._meta_text = meta_text

    @property
    def meta(self) -> dict[str, Any]:
        """Step name, source hash, input fingerprints, job id, creation time."""
        if self._meta is None:
            self._meta = json.loads(self._meta_text or "{}")
        return self._meta

    def to_text(self) -> str:
        """The stored form."""
        meta = self._meta_text if self._meta is None else json.dumps(self._meta)
        usage = json.dumps(self.usage) if self.usage else ""
        return f"{self.fingerprint}\n{self.version or ''}\n{usage}\n{self.result}\n{meta or '{}'}"

    @classmethod
    def from_text(cls, text: str) -> CacheEntry:
        """Parse the stored form."""
        fp, version, usage, result, meta = text.split("\n", 4)
        return cls(fp, version or None, result, json.loads(usage) if usage else None, None, meta)

    def as_dict(self) -> dict[str, Any]:
        """Everything, as one JSON-able dict (history and ``fxtr cache``)."""
        return {
            "fingerprint": self.fingerprint,
            "version": self.version,
            "result": self.result,
            "usage": self.usage,
            **self.meta,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CacheEntry:
        """Rebuild from ``as_dict``."""
        rest = {
            k: v for k, v in data.items() if k not in ("fingerprint", "version", "result", "usage")
        }
        return cls(
            data["fingerprint"], data.get("version"), data["result"], data.get("usage"), rest
        )


def keeps(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether an invocation's record stands against a later one of the same attempt.

    Processes that join one job (pytest-xdist workers) each record every invocation; the one
    that ran it and the ones that then found it in the cache write the same attempt. The run
    is what happened; a later cache hit of the same attempt does not replace it.
    """
    return (
        bool(new.get("from_cache"))
        and not old.get("from_cache")
        and old.get("status") == "succeeded"
        and new.get("attempt") == old.get("attempt")
    )


@dataclasses.dataclass(slots=True)
class Batch:
    """Writes gathered while the event loop runs, committed together in one transaction."""

    entries: dict[str, str] = dataclasses.field(default_factory=dict)
    """New cache entries by address (``CacheEntry.to_text``)."""
    replaced: dict[str, str] = dataclasses.field(default_factory=dict)
    """Entries moved to the history before being replaced, by address."""
    released: list[str] = dataclasses.field(default_factory=list)
    """Addresses whose claims this process gives up."""
    entities: dict[str, str] = dataclasses.field(default_factory=dict)
    """Entity texts by id."""
    invocations: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    """Invocation records per job id."""
    values: dict[str, str] = dataclasses.field(default_factory=dict)
    """Canonical texts of step inputs by fingerprint (what an invocation received)."""
    failures: dict[str, str] = dataclasses.field(default_factory=dict)
    """Failed invocation records by ``JOB|ATTEMPT|ADDRESS``, for processes that joined the
    attempt and wait on the address."""

    def __bool__(self) -> bool:
        return bool(
            self.entries
            or self.replaced
            or self.released
            or self.entities
            or self.invocations
            or self.values
            or self.failures
        )
