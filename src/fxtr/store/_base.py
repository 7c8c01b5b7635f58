"""What every store shares: the cache entry's stored form, the batch of writes, claims' liveness.

Both stores (``_diskcache`` and ``_postgres``) import from here and never from each other;
``_factory.open_store`` picks one by location.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from collections.abc import Iterable
from typing import Any

from fxtr.experiment.errors import FxtrError
from fxtr.secrets import redact


class StoreError(FxtrError):
    """A store that cannot be opened or read: the message names the path and what to do."""


class StoreOutage(StoreError):
    """The store stopped answering in the middle of a job (its server went away).

    The job stops scheduling at the first write that fails so; what completed before is
    stored, and the job is resumed once the store is back.
    """


def is_outage(error: BaseException) -> bool:
    """Whether a store write failed because the store is gone (not because of a value).

    A lost or refused database connection: psycopg's ``OperationalError`` and
    ``InterfaceError`` (a step's own errors never reach the store's callers); a store whose
    files cannot be written (``UnwritableStoreError``).
    """
    if isinstance(error, StoreOutage):
        return True
    kind = type(error)
    return kind.__module__.startswith("psycopg") and any(
        c.__name__ in ("OperationalError", "InterfaceError") for c in kind.__mro__
    )


def outage_message(where: Any, error: BaseException, job_id: str, attempt: int) -> str:
    """What a job stopped by a store outage says, once: what happened, then how to resume."""
    what, remedy = getattr(error, "what", None), getattr(error, "remedy", None)
    if not (isinstance(error, StoreOutage) and what and remedy):  # the server went away
        what = (
            f"The store at {where} stopped answering ({type(error).__name__}: "
            f"{' '.join(str(error).split())})."
        )
        when = "once the store is back,"
    else:
        when = f"{remedy}, then"
    return (
        f"{what} fxtr stopped this job (attempt {attempt}) at the first result it could not "
        f"store. Results stored before are kept: {when} resume the job (fxtr resume "
        f"{job_id}, or pytest --fxtr-resume) and only what did not finish runs."
    )


def is_url(location: Any) -> bool:
    """Whether a store location is a database URL rather than a directory."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def pid_alive(pid: int) -> bool:
    """Whether a process on this host is still running (a claim's holder).

    A zombie (killed, not yet reaped by its parent, as a killed pytest-xdist worker is) is
    not running, though signals still reach its process id.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:  # no /proc (not Linux), or it went away: the signal said it runs
        return False
    state = stat[stat.rfind(b")") + 2 :][:1]  # the field after the command's parentheses
    return state == b"Z"


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


def row_checksum(
    fingerprint: Any, version: Any, usage: Any, result: Any, meta: Any, code: Any
) -> str:
    """The checksum of an entry's every column, as a database row keeps it (``=`` first)."""
    parts = [fingerprint, version, usage, result, meta, code]
    return "=" + checksum_of("\x1f".join("" if p is None else str(p) for p in parts))


def checksum_of(result: str) -> str:
    """The checksum stored with a result: the first 32 hex digits of its sha256."""
    return hashlib.sha256(result.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class CacheEntry:
    """A step-cache entry: fingerprint, version, usage, result text, and the rest (lazily).

    Stored as a checksum line and five lines, so a cache hit reads the fingerprint and the
    result without parsing the metadata: ``#checksum`` (of the result text), fingerprint,
    version, usage JSON (or empty), result, metadata JSON. A stored entry whose result does
    not match its checksum, or whose text cannot be parsed, is read as a *damaged* entry
    (``damaged`` true, nothing else usable): the engine treats it as a miss and recomputes
    it, never serves it. Entries written before checksums (no ``#`` line) are read as before.

    The fingerprint line may carry, after a space, the JSON of ``code``: the code the step's
    calls reached that its fingerprint could not know before it ran (a mock model's reply
    function, ``"mock/NAME": digest``). An address keeps one entry per ``key``: the
    fingerprint, plus a digest of ``code`` when there is some.
    """

    __slots__ = (
        "_meta",
        "_meta_text",
        "code",
        "damaged",
        "fingerprint",
        "result",
        "usage",
        "version",
    )

    def __init__(
        self,
        fingerprint: str,
        version: str | None,
        result: str,
        usage: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        meta_text: str | None = None,
        damaged: bool = False,
        code: dict[str, str] | None = None,
    ) -> None:
        self.fingerprint = fingerprint
        self.version = version
        self.result = result
        """Canonical text of the result."""
        self.usage = usage
        """Model calls the step made when it ran: calls, tokens, dollars (None: none)."""
        self._meta = meta
        self._meta_text = meta_text
        self.damaged = damaged
        """The stored entry failed its checksum or could not be parsed: not a result."""
        self.code = code or None
        """Code reached at run time, by name (``"mock/NAME"``) and digest; None: none."""

    @classmethod
    def damaged_entry(cls) -> CacheEntry:
        """What a damaged stored entry reads as."""
        return cls("", None, "", None, {}, None, damaged=True)

    @property
    def key(self) -> str:
        """What an address keeps one entry per: the fingerprint (and the code it reached)."""
        return entry_key(self.fingerprint, self.code)

    @property
    def parts(self) -> list[str]:
        """The digests of the parts (``Batch.blobs``) the result names.

        The entry is served only while every one is present. Kept in the metadata
        (``"parts"``); an entry without parts is answered without parsing it.
        """
        if self._meta is None and '"parts"' not in (self._meta_text or ""):
            return []
        parts = self.meta.get("parts")
        return [p for p in parts if isinstance(p, str)] if isinstance(parts, list) else []

    @property
    def meta(self) -> dict[str, Any]:
        """Step name, source hash, input fingerprints, job id, creation time."""
        if self._meta is None:
            try:
                meta = json.loads(self._meta_text or "{}")
            except ValueError:  # an entry written before whole-entry checksums, cut
                meta = None
            self._meta = meta if isinstance(meta, dict) else {"unreadable": True}
        return self._meta

    def to_text(self) -> str:
        """The stored form."""
        meta = self._meta_text if self._meta is None else json.dumps(self._meta)
        usage = json.dumps(self.usage) if self.usage else ""
        fp = self.fingerprint
        if self.code:
            fp += " " + json.dumps(self.code, sort_keys=True, separators=(",", ":"))
        body = f"{fp}\n{self.version or ''}\n{usage}\n{self.result}\n{meta or '{}'}"
        return f"#={checksum_of(body)}\n{body}"  # the checksum covers every line

    @classmethod
    def from_text(cls, text: str) -> CacheEntry:
        """Parse the stored form; a damaged entry when it fails its checksum or cannot be read."""
        checksum = None
        try:
            if text.startswith("#"):
                head, _, text = text.partition("\n")
                checksum = head[1:]
                if checksum.startswith("="):  # of the whole entry: header, result, metadata
                    if checksum[1:] != checksum_of(text):
                        return cls.damaged_entry()
                    checksum = None
            fp, version, usage, result, meta = text.split("\n", 4)
            fp, _, code = fp.partition(" ")
            entry = cls(
                fp,
                version or None,
                result,
                json.loads(usage) if usage else None,
                None,
                meta,
                code=json.loads(code) if code else None,
            )
        except (ValueError, TypeError, AttributeError):
            return cls.damaged_entry()
        if checksum is not None and checksum != checksum_of(result):
            return cls.damaged_entry()
        return entry

    @classmethod
    def from_columns(
        cls,
        fingerprint: str,
        version: str | None,
        usage: str | None,
        result: str,
        meta: str,
        checksum: str | None,
        code: str | None = None,
    ) -> CacheEntry:
        """An entry from a database row; a damaged entry when it fails its checksum.

        A checksum starting ``=`` covers every column (``row_checksum``); one without, written
        before, the result only.
        """
        if checksum is not None and checksum.startswith("="):
            if checksum != row_checksum(fingerprint, version, usage, result, meta, code):
                return cls.damaged_entry()
            checksum = None
        try:
            parsed = json.loads(usage) if usage else None
            reached = json.loads(code) if code else None
        except ValueError:
            return cls.damaged_entry()
        if checksum is not None and checksum != checksum_of(result):
            return cls.damaged_entry()
        return cls(fingerprint, version, result, parsed, None, meta, code=reached)

    def code_text(self) -> str | None:
        """``code`` as the database column keeps it (canonical JSON), or None."""
        return json.dumps(self.code, sort_keys=True, separators=(",", ":")) if self.code else None

    def as_dict(self) -> dict[str, Any]:
        """Everything, as one JSON-able dict (history and ``fxtr cache``)."""
        out = {
            "fingerprint": self.fingerprint,
            "version": self.version,
            "result": self.result,
            "usage": self.usage,
            **self.meta,
        }
        if self.code:
            out["code"] = self.code
        if self.damaged:
            out["damaged"] = True
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CacheEntry:
        """Rebuild from ``as_dict``."""
        rest = {
            k: v
            for k, v in data.items()
            if k not in ("fingerprint", "version", "result", "usage", "code", "damaged")
        }
        return cls(
            data["fingerprint"],
            data.get("version"),
            data["result"],
            data.get("usage"),
            rest,
            code=data.get("code"),
        )


def blob_digest(data: bytes) -> str:
    """A part's digest, the name the store keeps it by: the sha256 hex of its bytes."""
    return hashlib.sha256(data).hexdigest()


def intact_blobs(found: Iterable[tuple[str, bytes]]) -> tuple[dict[str, bytes], list[str]]:
    """The parts whose bytes hash to their digest, and the digests of the damaged others."""
    good: dict[str, bytes] = {}
    damaged: list[str] = []
    for digest, data in found:
        if hashlib.sha256(data).hexdigest() == digest:
            good[digest] = data
        else:
            damaged.append(digest)
    return good, damaged


def entry_key(fingerprint: str, code: dict[str, str] | None) -> str:
    """The key an address keeps one entry per (``CacheEntry.key``)."""
    if not code:
        return fingerprint
    text = json.dumps(code, sort_keys=True, separators=(",", ":"))
    return fingerprint + "+" + hashlib.sha256(text.encode()).hexdigest()[:16]


DEFAULT_KEEP = 20
"""Entries an address keeps at most (``--fxtr-cache-keep``, ``cache_keep=``)."""


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
    """New cache entries by address (``CacheEntry.to_text``): each becomes its address's
    current entry; the one it displaces is kept (one per key), past ``keep`` the entry that
    was current longest ago goes."""
    current: dict[str, str] = dataclasses.field(default_factory=dict)
    """Kept entries that became current again (a hit), by address: the entry's key."""
    keep: int = DEFAULT_KEEP
    """Entries an address keeps at most, the current one included."""
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
    blobs: dict[str, bytes] = dataclasses.field(default_factory=dict, repr=False)
    """Content-addressed parts by digest (``blob_digest``), written in the same transaction
    as the entries that name them, so a cached result never names a part the store lacks;
    a digest already stored is not written again."""
    invocation_texts: dict[str, list[str]] = dataclasses.field(default_factory=dict, repr=False)
    """The JSON text of each record of ``invocations``, in order, where ``redact_batch``
    already made it (to check it for credentials): a store writes these (``record_texts``)
    rather than encoding every record a second time."""

    def record_texts(self, job_id: str) -> list[str]:
        """The JSON texts of a job's records, in order (made now where not made before)."""
        rows = self.invocations[job_id]
        texts = self.invocation_texts.get(job_id)
        if texts is None or len(texts) != len(rows):
            texts = [json.dumps(r) for r in rows]
        return texts

    def __bool__(self) -> bool:
        return bool(
            self.entries
            or self.current
            or self.released
            or self.entities
            or self.invocations
            or self.values
            or self.failures
            or self.blobs
        )


_canonical = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True
).encode
"""The engine's canonical JSON (``fxtr.experiment._encoding``), to re-encode a redacted result."""


def redact_tree(value: Any) -> Any:
    """A JSON-able tree with every string (and dict key) redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_tree(v) for v in value]
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_tree(v) for k, v in value.items()}
    return value


def redact_json_text(text: str) -> str:
    """A JSON text with every credential removed from its strings; still valid JSON.

    Redacting the text itself could cut an escape sequence; a text that holds a credential
    is decoded, redacted string by string and encoded again (canonically).
    """
    redacted = redact(text)
    if redacted == text:
        return text
    try:
        tree = json.loads(text)
    except ValueError:
        return redacted
    return _canonical(redact_tree(tree))


def redact_record(record: dict[str, Any]) -> dict[str, Any]:
    """An invocation record with every credential removed (its result text stays valid)."""
    out: dict[str, Any] = redact_tree(record)
    if isinstance(record.get("result_text"), str):
        out["result_text"] = redact_json_text(record["result_text"])
    return out


def redact_json(value: Any) -> Any:
    """A JSON-able value (a job record, workflow records) without credentials; itself if clean."""
    text = json.dumps(value)
    return value if redact(text) == text else redact_tree(value)


def _redact_entry(text: str) -> str:
    if redact(text) == text:
        return text
    entry = CacheEntry.from_text(text)
    usage = redact_tree(entry.usage) if entry.usage else None
    result, meta = redact_json_text(entry.result), redact_tree(entry.meta)
    redacted = CacheEntry(entry.fingerprint, entry.version, result, usage, meta, code=entry.code)
    return redacted.to_text()


def _redact_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    text = json.dumps(records)
    if redact(text) == text:
        return records
    return [redact_record(r) for r in records]


def redact_batch(batch: Batch) -> Batch:
    """The batch with every known credential (``fxtr.secrets``) removed from its texts.

    Applied to every batch before it is written, whatever the store: cache entries (results,
    usage, metadata), invocation records (errors, tracebacks, logs, results, model calls),
    failure markers, entities and input values. A text without a credential is kept as is (one
    scan of it); the cached result of a step that returned a credential is the redacted one.
    Entries kept at an address were redacted when they were written. A batch whose texts
    are all clean (most are) is checked in one scan of them joined by newlines (which no
    credential pattern crosses: ``fxtr.secrets``) and written as it is. A part (``blobs``)
    that holds a credential is left out (``_holds_secret``).
    """
    records = {job: [json.dumps(r) for r in rows] for job, rows in batch.invocations.items()}
    texts = [
        *batch.entries.values(),
        *batch.entities.values(),
        *batch.values.values(),
        *batch.failures.values(),
        *(text for job_texts in records.values() for text in job_texts),
    ]
    joined = "\n".join(texts)
    blobs = batch.blobs
    if blobs:  # a part is bytes: read as Latin-1 (every byte a character), checked alike
        parts = "\n".join(b.decode("latin-1") for b in blobs.values())
        if redact(parts) != parts:
            blobs = {d: b for d, b in blobs.items() if not _holds_secret(b)}
    if redact(joined) == joined:
        return dataclasses.replace(batch, invocation_texts=records, blobs=blobs)
    return Batch(
        entries={a: _redact_entry(t) for a, t in batch.entries.items()},
        current=batch.current,
        keep=batch.keep,
        released=batch.released,
        entities={k: redact_json_text(t) for k, t in batch.entities.items()},
        invocations={job: _redact_records(rows) for job, rows in batch.invocations.items()},
        values={k: redact_json_text(t) for k, t in batch.values.items()},
        failures={k: redact_json_text(t) for k, t in batch.failures.items()},
        blobs=blobs,
    )


def _holds_secret(data: bytes) -> bool:
    """Whether a part holds a credential.

    Such a part is not written (a part is named by its bytes, so it cannot be stored
    redacted); an entry that names it is then a miss.
    """
    text = data.decode("latin-1")
    return redact(text) != text
