"""The embedded store's records of what happened: jobs, invocations, attempts, task graphs.

``DiskRecords`` is the half of ``DiskStore`` that keeps the record: job records in
``FxtrJobs`` and invocation records in ``FxtrInvocations`` (``_tables``), and, as keys of the
cache (see ``_diskcache``), each attempt's operations (``o|``) and workflow invocations
(``w|``), failure markers (``x|``), resume pointers (``l|``) and task graphs (``tc|``,
``tn|``). ``_diskcache`` keeps the step cache and the claims, and lends this class its cache
and key reads. Only ``_diskcache`` uses this module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fxtr.store._base import keeps, parse_job
from fxtr.store._unwritable import writes

if TYPE_CHECKING:
    import diskcache

    from fxtr.store._tables import InvocationTable, JobTable
    from fxtr.store._unwritable import UnwritableStoreError


class DiskRecords:
    """Job records, invocation records, attempts' operations and task graphs, on diskcache."""

    path: Path
    cache: diskcache.Cache
    jobs: JobTable
    """Job records by job id, apart from the cache entries so that listing them is cheap."""
    records: InvocationTable
    read_only: UnwritableStoreError | None

    if TYPE_CHECKING:

        def _keys(self, prefix: str) -> list[str]: ...
        def _get_many(self, keys: list[str]) -> dict[str, str]: ...

    # job records ----------------------------------------------------------------------

    def _move_job_records(self) -> None:
        """Stores written before ``jobs/`` existed kept job records as ``j|JOB`` in the cache."""
        keys = self._keys("j|")
        if not keys:
            return
        with self.cache.transact():
            for key in keys:
                text = self.cache.get(key)
                if text is not None:
                    self.jobs.set(key[2:], text)
                self.cache.delete(key)

    @writes
    def put_job(self, record: dict[str, Any]) -> None:
        """Write a job's record (root workflow, inputs, commit, attempts)."""
        self.jobs.set(record["job_id"], json.dumps(record))

    def get_job(self, job_id: str) -> dict[str, Any]:
        """A job's record.

        Raises:
            KeyError: the store has no such job.
        """
        text = self.jobs.get(job_id)
        if text is None:
            msg = f"No job {job_id!r} in the store at {self.path}. `fxtr jobs` lists the jobs."
            raise KeyError(msg)
        record: dict[str, Any] = json.loads(text)
        return record

    @writes
    def update_job(self, job_id: str, **fields: Any) -> dict[str, Any]:
        """Merge fields into a job's record, in one transaction; the record as written.

        Raises:
            KeyError: the store has no such job.
        """
        with self.cache.transact():
            record = self.get_job(job_id)
            record.update(fields)
            self.put_job(record)
        return record

    def has_job(self, job_id: str) -> bool:
        """Whether the store holds a job."""
        return job_id in self.jobs

    def iter_jobs(self) -> Iterator[dict[str, Any]]:
        """Every job record (damaged ones are skipped with a warning); cache entries unread."""
        for job_id, text in self.jobs.items():
            record = parse_job(text, f"{job_id!r} in {self.path}")
            if record is not None:
                yield record

    # invocation records ---------------------------------------------------------------

    def job_invocations(self, job_id: str) -> dict[str, dict[str, Any]]:
        """The latest record of each invocation of a job, by address (see ``keeps``)."""
        with self.cache.transact():
            out = self._legacy_invocations(job_id)
            for address, text in self.records.all(job_id).items():
                record = json.loads(text)
                old = out.get(address)
                if old is None or not keeps(old, record):
                    out[address] = record
        return out

    def _legacy_invocations(self, job_id: str) -> dict[str, dict[str, Any]]:
        """Records a store written before ``FxtrInvocations`` kept as chunks (often none)."""
        count = self.cache.get("s|" + job_id, 0)
        out: dict[str, dict[str, Any]] = {}
        for seq in range(count):
            text = self.cache.get(f"i|{job_id}|{seq}")
            if text is None:
                continue
            for record in json.loads(text):
                old = out.get(record["address"])
                if old is None or not keeps(old, record):
                    out[record["address"]] = record
        return out

    def job_invocations_at(
        self, job_id: str, addresses: list[str], *, status: str | None = None
    ) -> dict[str, dict[str, Any]]:
        """The latest records of a job at some addresses (with ``status``, if given).

        Read by address from the table: a resume reads one chunk at a time.
        """
        if self.cache.get("s|" + job_id) is not None:  # an old store's chunks: read them all
            every = self.job_invocations(job_id)
            found = {a: every[a] for a in addresses if a in every}
        else:
            rows = self.records.at(job_id, addresses, status)
            found = {a: json.loads(t) for a, t in rows.items()}
        if status is None:
            return found
        return {a: r for a, r in found.items() if r.get("status") == status}

    def job_unfinished(self, job_id: str) -> dict[str, dict[str, Any]]:
        """The latest records of a job's invocations that did not succeed, by address.

        Read from the status index: the succeeded ones are not read.
        """
        if self.cache.get("s|" + job_id) is not None:
            every = self.job_invocations(job_id)
            return {a: r for a, r in every.items() if r.get("status") != "succeeded"}
        return {a: json.loads(t) for a, t in self.records.unfinished(job_id).items()}

    def get_failures(self, keys: list[str]) -> dict[str, str]:
        """Failed invocations' records by ``JOB|ATTEMPT|ADDRESS``, where some were written."""
        return {k[2:]: v for k, v in self._get_many(["x|" + key for key in keys]).items()}

    # attempts and resume pointers -----------------------------------------------------

    @writes
    def put_ops(self, job_id: str, attempt: int, ops: dict[str, list[dict[str, Any]]]) -> None:
        """Record the operations each workflow invocation scheduled in an attempt."""
        self.cache.set(f"o|{job_id}|{attempt}", json.dumps(ops))

    def get_ops(self, job_id: str, attempt: int) -> dict[str, list[dict[str, Any]]] | None:
        """The operations recorded for an attempt, if it got that far."""
        text = self.cache.get(f"o|{job_id}|{attempt}")
        return None if text is None else json.loads(text)

    @writes
    def put_workflows(self, job_id: str, attempt: int, workflows: list[dict[str, Any]]) -> None:
        """Record the workflow invocations of an attempt (status, error, logs, notices)."""
        self.cache.set(f"w|{job_id}|{attempt}", json.dumps(workflows))

    def get_workflows(self, job_id: str, attempt: int) -> list[dict[str, Any]]:
        """The workflow invocations recorded for an attempt."""
        text = self.cache.get(f"w|{job_id}|{attempt}")
        return [] if text is None else json.loads(text)

    @writes
    def set_last_job(self, key: str, job_id: str) -> None:
        """Remember the last job launched for a key."""
        self.cache.set("l|" + key, job_id)

    def get_last_job(self, key: str) -> str | None:
        """The last job launched for a key."""
        value: str | None = self.cache.get("l|" + key)
        return value

    # tracing graphs -------------------------------------------------------------------

    def iter_tasks(self) -> Iterator[str]:
        """Ids of the tracing tasks in the store."""
        for key in self._keys("tc|"):
            yield key[3:]

    @writes
    def next_trace_seq(self, task_id: str) -> int:
        """A new position in a task graph's node list."""
        return int(self.cache.incr("tc|" + task_id)) - 1

    @writes
    def put_trace_node(self, task_id: str, seq: int, node: dict[str, Any]) -> None:
        """Write (or rewrite) one node of a task graph."""
        self.cache.set(f"tn|{task_id}|{seq}", json.dumps(node))

    def get_trace_nodes(self, task_id: str) -> list[dict[str, Any]]:
        """A task graph's nodes in creation order (empty when the store lacks the task)."""
        count = self.cache.get("tc|" + task_id, 0)
        nodes = []
        with self.cache.transact():
            for seq in range(count):
                text = self.cache.get(f"tn|{task_id}|{seq}")
                if text is not None:
                    nodes.append(json.loads(text))
        return nodes
