"""The PostgreSQL store's records of what happened: jobs, invocations, attempts, task graphs.

``PostgresRecords`` is the half of ``PostgresStore`` that keeps the record (``fxtr_jobs``,
``fxtr_invocations`` with each record's status indexed, ``fxtr_attempts``, ``fxtr_last``,
``fxtr_failures``, ``fxtr_trace``); ``_postgres`` keeps the connection, the schema, the step
cache and the claims, and lends this class its connection (``_conn``, ``_one``). Only
``_postgres`` uses this module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fxtr.store._base import Batch, parse_job

if TYPE_CHECKING:
    from fxtr.store._postgres import _Locked


class PostgresRecords:
    """Job records, invocation records, attempts' operations and task graphs, in PostgreSQL."""

    path: str
    """The URL without its password, for messages."""

    if TYPE_CHECKING:

        def _conn(self) -> _Locked: ...
        def _one(self, sql: str, params: tuple[Any, ...] = ()) -> Any: ...

    # job records ----------------------------------------------------------------------

    def put_job(self, record: dict[str, Any]) -> None:
        """Write a job's record."""
        self._conn().execute(
            "INSERT INTO fxtr_jobs (job_id, record, created_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (job_id) DO UPDATE SET record = EXCLUDED.record",
            (record["job_id"], json.dumps(record), record.get("created_at")),
        )

    def get_job(self, job_id: str) -> dict[str, Any]:
        """A job's record.

        Raises:
            KeyError: the store has no such job.
        """
        text = self._one("SELECT record FROM fxtr_jobs WHERE job_id = %s", (job_id,))
        if text is None:
            msg = f"No job {job_id!r} in the store at {self.path}. `fxtr jobs` lists the jobs."
            raise KeyError(msg)
        record: dict[str, Any] = json.loads(text)
        return record

    def has_job(self, job_id: str) -> bool:
        """Whether the store holds a job."""
        return self._one("SELECT 1 FROM fxtr_jobs WHERE job_id = %s", (job_id,)) is not None

    def update_job(self, job_id: str, **fields: Any) -> dict[str, Any]:
        """Merge fields into a job's record, in one transaction; the record as written.

        Raises:
            KeyError: the store has no such job.
        """
        conn = self._conn()
        with conn.transaction():
            row = conn.execute(
                "SELECT record FROM fxtr_jobs WHERE job_id = %s FOR UPDATE", (job_id,)
            ).fetchone()
            if row is None:
                msg = f"No job {job_id!r} in the store at {self.path}. `fxtr jobs` lists the jobs."
                raise KeyError(msg)
            record: dict[str, Any] = json.loads(row[0])
            record.update(fields)
            conn.execute(
                "UPDATE fxtr_jobs SET record = %s WHERE job_id = %s", (json.dumps(record), job_id)
            )
        return record

    def iter_jobs(self) -> Iterator[dict[str, Any]]:
        """Every job record, oldest first (damaged ones are skipped with a warning)."""
        rows = (
            self._conn()
            .execute("SELECT job_id, record FROM fxtr_jobs ORDER BY created_at")
            .fetchall()
        )
        for job_id, text in rows:
            record = parse_job(text, f"{job_id!r} in {self.path}")
            if record is not None:
                yield record

    # invocation records ---------------------------------------------------------------

    def job_invocations(self, job_id: str) -> dict[str, dict[str, Any]]:
        """The latest record of each invocation of a job, by address."""
        rows = (
            self._conn()
            .execute("SELECT address, record FROM fxtr_invocations WHERE job_id = %s", (job_id,))
            .fetchall()
        )
        return {address: json.loads(text) for address, text in rows}

    def job_invocations_at(
        self, job_id: str, addresses: list[str], *, status: str | None = None
    ) -> dict[str, dict[str, Any]]:
        """The latest records of a job at some addresses (with ``status``, if given).

        One query: a resume reads one chunk at a time.
        """
        params: tuple[str, ...] = ()
        if status is None:
            sql = ""
        else:  # rows written before the status column have NULL: their record says
            sql, params = " AND (status = %s OR status IS NULL)", (status,)
        rows = (
            self._conn()
            .execute(
                "SELECT address, record FROM fxtr_invocations WHERE job_id = %s "
                f"AND address = ANY(%s){sql}",
                (job_id, list(addresses), *params),
            )
            .fetchall()
        )
        found = {address: json.loads(text) for address, text in rows}
        if status is None:
            return found
        return {a: r for a, r in found.items() if r.get("status") == status}

    def job_unfinished(self, job_id: str) -> dict[str, dict[str, Any]]:
        """The latest records of a job's invocations that did not succeed, by address.

        Read from the status index: the succeeded ones are not read.
        """
        rows = (
            self._conn()
            .execute(
                "SELECT address, record FROM fxtr_invocations WHERE job_id = %s "
                "AND (status IS NULL OR status <> 'succeeded')",
                (job_id,),
            )
            .fetchall()
        )
        found = {address: json.loads(text) for address, text in rows}
        return {a: r for a, r in found.items() if r.get("status") != "succeeded"}

    def get_failures(self, keys: list[str]) -> dict[str, str]:
        """Failed invocations' records by ``JOB|ATTEMPT|ADDRESS``, where some were written."""
        rows = (
            self._conn()
            .execute("SELECT key, record FROM fxtr_failures WHERE key = ANY(%s)", (keys,))
            .fetchall()
        )
        return dict(rows)

    # attempts and resume pointers -----------------------------------------------------

    def _put_attempt(self, job_id: str, attempt: int, kind: str, body: Any) -> None:
        self._conn().execute(
            "INSERT INTO fxtr_attempts (job_id, attempt, kind, body) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (job_id, attempt, kind) DO UPDATE SET body = EXCLUDED.body",
            (job_id, attempt, kind, json.dumps(body)),
        )

    def _get_attempt(self, job_id: str, attempt: int, kind: str) -> Any:
        text = self._one(
            "SELECT body FROM fxtr_attempts WHERE job_id = %s AND attempt = %s AND kind = %s",
            (job_id, attempt, kind),
        )
        return None if text is None else json.loads(text)

    def put_ops(self, job_id: str, attempt: int, ops: dict[str, list[dict[str, Any]]]) -> None:
        """Record the operations each workflow invocation scheduled in an attempt."""
        self._put_attempt(job_id, attempt, "ops", ops)

    def get_ops(self, job_id: str, attempt: int) -> dict[str, list[dict[str, Any]]] | None:
        """The operations recorded for an attempt, if it got that far."""
        ops: dict[str, list[dict[str, Any]]] | None = self._get_attempt(job_id, attempt, "ops")
        return ops

    def put_workflows(self, job_id: str, attempt: int, workflows: list[dict[str, Any]]) -> None:
        """Record the workflow invocations of an attempt."""
        self._put_attempt(job_id, attempt, "workflows", workflows)

    def get_workflows(self, job_id: str, attempt: int) -> list[dict[str, Any]]:
        """The workflow invocations recorded for an attempt."""
        return self._get_attempt(job_id, attempt, "workflows") or []

    def set_last_job(self, key: str, job_id: str) -> None:
        """Remember the last job launched for a key."""
        self._conn().execute(
            "INSERT INTO fxtr_last (key, job_id) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET job_id = EXCLUDED.job_id",
            (key, job_id),
        )

    def get_last_job(self, key: str) -> str | None:
        """The last job launched for a key."""
        value: str | None = self._one("SELECT job_id FROM fxtr_last WHERE key = %s", (key,))
        return value

    # tracing graphs -------------------------------------------------------------------

    def next_trace_seq(self, task_id: str) -> int:
        """A new position in a task graph's node list."""
        value = self._one(
            "INSERT INTO fxtr_trace_seq (task_id, n) VALUES (%s, 1) ON CONFLICT (task_id) "
            "DO UPDATE SET n = fxtr_trace_seq.n + 1 RETURNING n",
            (task_id,),
        )
        return int(value) - 1

    def put_trace_node(self, task_id: str, seq: int, node: dict[str, Any]) -> None:
        """Write (or rewrite) one node of a task graph."""
        self._conn().execute(
            "INSERT INTO fxtr_trace (task_id, seq, node) VALUES (%s, %s, %s) "
            "ON CONFLICT (task_id, seq) DO UPDATE SET node = EXCLUDED.node",
            (task_id, seq, json.dumps(node)),
        )

    def get_trace_nodes(self, task_id: str) -> list[dict[str, Any]]:
        """A task graph's nodes in creation order."""
        rows = (
            self._conn()
            .execute("SELECT node FROM fxtr_trace WHERE task_id = %s ORDER BY seq", (task_id,))
            .fetchall()
        )
        return [json.loads(r[0]) for r in rows]

    def iter_tasks(self) -> Iterator[str]:
        """Ids of the tracing tasks in the store."""
        for (task_id,) in self._conn().execute("SELECT task_id FROM fxtr_trace_seq").fetchall():
            yield task_id

    # a batch's records ----------------------------------------------------------------

    def _write_records(self, cur: Any, batch: Batch) -> None:
        """A batch's invocation records and failure markers (in the caller's transaction)."""
        for job_id, records in batch.invocations.items():
            texts = batch.record_texts(job_id)
            latest = {r["address"]: (r, t) for r, t in zip(records, texts, strict=True)}
            # a cache hit of the same attempt does not replace the run (see ``keeps``)
            cur.executemany(
                "INSERT INTO fxtr_invocations (job_id, address, record, attempt, ran, status) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (job_id, address) DO UPDATE SET "
                "record = EXCLUDED.record, attempt = EXCLUDED.attempt, ran = EXCLUDED.ran, "
                "status = EXCLUDED.status "
                "WHERE EXCLUDED.ran OR NOT fxtr_invocations.ran "
                "OR EXCLUDED.attempt <> fxtr_invocations.attempt",
                [
                    (
                        job_id,
                        a,
                        text,
                        r.get("attempt", 0),
                        not (r.get("from_cache") or r.get("status") != "succeeded"),
                        r.get("status", "skipped"),
                    )
                    for a, (r, text) in latest.items()
                ],
            )
        if batch.failures:
            cur.executemany(
                "INSERT INTO fxtr_failures (key, record) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET record = EXCLUDED.record",
                list(batch.failures.items()),
            )
