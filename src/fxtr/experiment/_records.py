"""Records of what a job did: one per step invocation and one per workflow invocation."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from fxtr.store import Store

InvocationStatus = Literal["succeeded", "failed", "skipped", "needs_review"]


def _read_only(*args: Any, **kwargs: Any) -> Any:
    msg = (
        "this empty list or dict belongs to a finished invocation record and is shared; "
        "assign a new one to the field instead of changing it"
    )
    raise TypeError(msg)


class _EmptyList(list[Any]):
    """The one read-only empty list that finished records share (see ``compact``)."""

    __slots__ = ()
    append = extend = insert = remove = pop = clear = sort = reverse = _read_only
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only

    def __reduce__(self) -> Any:
        return (list, ())


class _EmptyDict(dict[str, Any]):
    """The one read-only empty dict that finished records share (see ``compact``)."""

    __slots__ = ()
    __setitem__ = __delitem__ = setdefault = update = pop = popitem = clear = _read_only
    __ior__ = _read_only

    def __reduce__(self) -> Any:
        return (dict, ())


EMPTY_LIST: list[Any] = _EmptyList()
EMPTY_DICT: dict[str, Any] = _EmptyDict()


@dataclasses.dataclass(slots=True, eq=False)
class Invocation:
    """One step invocation: what ran (or did not) at one address, and how it ended."""

    address: str
    """Path of names from the root workflow plus map keys: ``qa.evaluate/answer[model=a]``."""
    step: str
    """The ``name=`` of the ``@step``."""
    status: InvocationStatus = "skipped"
    from_cache: bool = False
    """True when the result was reused (step cache or an earlier attempt), not executed now."""
    reason: str | None = None
    """Failure reason (``tool_error``, ``budget``, ...), on failed invocations only."""
    error: str | None = None
    """``Type: message`` of the failure, the cause of a skip, or the conflict needing review."""
    category: str | None = None
    """The finer provider category of a failure (``rate_limit``, ``timeout``, ...), if any."""
    fingerprint: str | None = None
    input_fingerprints: dict[str, str] = dataclasses.field(default_factory=dict)
    result_text: str | None = None
    """Canonical text of the result (succeeded only)."""
    traceback: str | None = None
    logs: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    """Hermeticity notices: files read, environment consulted, files written."""
    conflict: dict[str, Any] | None = None
    """For ``needs_review``: what differs from the cached entry (inputs, source, version)."""
    changed: list[str] = dataclasses.field(default_factory=list)
    """Not served from the cache although its address held an entry: what differs from that
    entry (``case.target``, ``code of STEP``, ``code of mock/NAME``). Empty for a new
    address."""
    found: str | None = None
    """The key of the entry ``changed`` compares with (the one in review, or replaced)."""
    started_at: float | None = None
    ended_at: float | None = None
    attempt: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    calls: int = 0
    cost_by_model: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """Model calls made inside the step, per model: calls, tokens and dollars."""
    cost_by_role: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """The same per role of the call: ``"subject"`` or ``"judge"`` (the judge of a score)."""
    model_calls: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Each model call made inside the step: model, status, tokens, cost, times, reason."""

    @property
    def duration(self) -> float | None:
        """Seconds the invocation ran, when it ran."""
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

    def usage(self) -> dict[str, Any]:
        """Its model calls' count, tokens and dollars, as a cache entry keeps them."""
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "by_model": self.cost_by_model,
            "by_role": self.cost_by_role,
        }

    def take_usage(self, usage: dict[str, Any]) -> None:
        """Take the usage a cache entry or an earlier attempt recorded (see ``usage``)."""
        self.calls = usage.get("calls", 0)
        self.input_tokens = usage.get("input_tokens", 0)
        self.output_tokens = usage.get("output_tokens", 0)
        self.cost_usd = usage.get("cost_usd")
        self.cost_by_model = usage.get("by_model") or {}
        self.cost_by_role = usage.get("by_role") or {}

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON-able dict; fields at their defaults are left out."""
        out: dict[str, Any] = _to_json(self)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Invocation:
        """Rebuild a record written by ``to_json``."""
        names = _INVOCATION_FIELDS
        return cls(**{k: v for k, v in data.items() if k in names})

    def compact(self) -> None:
        """Share one read-only empty container for each empty list and dict field.

        Called as the record is finished: most records of a large job log nothing, call no
        model and warn of nothing, and five empty containers each were a third of what a
        record held in memory. A field's value stays equal to ``[]`` or ``{}``; mutating a
        finished record's shared empty container raises ``TypeError``.
        """
        if not self.logs:
            self.logs = EMPTY_LIST
        if not self.warnings:
            self.warnings = EMPTY_LIST
        if not self.model_calls:
            self.model_calls = EMPTY_LIST
        if not self.changed:
            self.changed = EMPTY_LIST
        if not self.cost_by_model:
            self.cost_by_model = EMPTY_DICT
        if not self.cost_by_role:
            self.cost_by_role = EMPTY_DICT
        if not self.input_fingerprints:
            self.input_fingerprints = EMPTY_DICT

    def report(self) -> dict[str, Any]:
        """The fields the JSON report and ``JobResult`` promise."""
        return {
            "address": self.address,
            "step": self.step,
            "status": self.status,
            "from_cache": self.from_cache,
            "reason": self.reason,
            "error": self.error,
        }


def _compile_to_json() -> Any:
    # straight-line code, as dataclasses and attrs generate theirs: a record is serialized
    # for every invocation, cached ones included, so this is on the hot path
    lines = [
        "def to_json(self):",
        "    out = {'address': self.address, 'step': self.step, 'status': self.status}",
    ]
    for f in dataclasses.fields(Invocation):
        if f.name not in ("address", "step", "status"):
            lines += [f"    v = self.{f.name}", f"    if v: out[{f.name!r}] = v"]
    lines.append("    return out")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)
    return namespace["to_json"]


_to_json = _compile_to_json()
_INVOCATION_FIELDS = frozenset(f.name for f in dataclasses.fields(Invocation))


class StoredRecords(Mapping[str, Invocation]):
    """A job's invocation records in the store, read a chunk of addresses at a time.

    What a resume (or ``verify``) replays against: the runner calls ``load`` with the
    addresses of the chunk of invocations it is about to resolve and ``forget`` once they
    are resolved, so the records of a 200,000-invocation job are never all in memory, and
    work starts after one read of one chunk. A live attempt loads only the succeeded records
    (the others run again, whatever they say); a verifying replay loads them all.
    """

    def __init__(self, store: Store, job_id: str) -> None:
        self.store = store
        self.job_id = job_id
        self._loaded: dict[str, Invocation] = {}

    def load(self, addresses: list[str], everything: bool) -> None:
        """Read the records at ``addresses`` (only the succeeded ones unless ``everything``)."""
        found = self.store.job_invocations_at(
            self.job_id, addresses, status=None if everything else "succeeded"
        )
        for address, record in found.items():
            self._loaded[address] = Invocation.from_json(record)

    def forget(self, addresses: list[str]) -> None:
        """Drop records that were read and have been resolved."""
        for address in addresses:
            self._loaded.pop(address, None)

    def __getitem__(self, address: str) -> Invocation:
        return self._loaded[address]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded)

    def __len__(self) -> int:
        return len(self._loaded)


@dataclasses.dataclass(slots=True, eq=False)
class WorkflowRun:
    """One workflow invocation (the root or a child): its body's outcome."""

    address: str
    workflow: str
    status: Literal["running", "succeeded", "skipped", "failed", "interrupted"] = "running"
    error: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    logs: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    """Hermeticity notices from the body (files read, environment consulted)."""
    result: str | None = None
    """The label of the handle the body returned: the operation that makes its result."""

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON-able dict."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkflowRun:
        """Rebuild a record written by ``to_json``."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
