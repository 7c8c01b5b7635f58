"""The ``fxtr jobs`` table: one line a job, within 100 columns unless ``--wide``."""

from __future__ import annotations

from typing import Any

from fxtr.report import format_usd


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


JOBS_WIDTH = 100
"""``fxtr jobs`` fits in this many columns (``--wide`` lists every column, however wide)."""
WIDE_COLUMNS = (
    ("job", "job_id"),
    ("eval", "eval"),
    ("workflow", "workflow"),
    ("status", "status"),
    ("gate", "gate"),
    ("attempts", "attempts"),
    ("ran", "ran"),
    ("cached", "cached"),
    ("failed", "failed"),
    ("tokens", "tokens"),
    ("cost", "cost_usd"),
    ("started", "started"),
    ("commit", "commit"),
)


def jobs_table(rows: list[dict[str, Any]], *, wide: bool = False) -> str:
    """The ``fxtr jobs`` table: job, eval (or workflow), status, gate and cost.

    It fits in ``JOBS_WIDTH`` columns: the eval's name, cut at its start when it must be
    (``…test_qa.py::test_qa``), takes what the other columns leave. ``wide`` lists every
    column of ``job_row`` instead.
    """
    from tabulate import tabulate

    def text(row: dict[str, Any], key: str) -> str:
        if key == "cost_usd":
            return format_usd(row["cost_usd"]) if row["cost_usd"] is not None else "n/a"
        return _cell(row.get(key))

    if wide:
        table = [[text(r, key) for _, key in WIDE_COLUMNS] for r in rows]
        headers = [name for name, _ in WIDE_COLUMNS]
        return str(tabulate(table, headers=headers, disable_numparse=True))
    keys = ("job_id", "name", "status", "gate", "cost_usd")
    table = [
        [_cell(r["eval"] or r["workflow"]) if k == "name" else text(r, k) for k in keys]
        for r in rows
    ]
    headers = ["job", "eval or workflow", "status", "gate", "cost"]
    # tabulate's simple format: a column is as wide as its widest cell, or its header + 2
    widths = [max(len(h) + 2, *(len(line[i]) for line in table)) for i, h in enumerate(headers)]
    room = JOBS_WIDTH - sum(w for i, w in enumerate(widths) if i != 1) - 2 * (len(keys) - 1)
    room = max(room, len(headers[1]) + 2)
    for line in table:
        if len(line[1]) > room:
            line[1] = "…" + line[1][-(room - 1) :]
    return str(tabulate(table, headers=headers, disable_numparse=True))


def judge_figures(evaluation: dict[str, Any]) -> list[str]:
    """``fxtr show``'s judge lines: the summary's formatter, indented under the groups.

    Per judged group the raw and corrected means, q0, q1, flip rate and position
    inconsistency (DESIGN §15), wrapped at 100 columns, never cut.
    """
    from fxtr.report import judge_lines

    groups = [g for g in evaluation.get("groups") or [] if isinstance(g, dict)]
    return ["  " + line for line in judge_lines(groups, JOBS_WIDTH - 2)]


class _InThisProcess:
    """Collect in this process: pytest-xdist (``-n`` in the ini's addopts) starts no workers."""

    def pytest_cmdline_main(self, config: Any) -> None:
        if getattr(config.option, "numprocesses", None):
            config.option.numprocesses = 0
            config.option.dist = "no"


def import_as_pytest(origin: dict[str, Any], error: type[Exception]) -> None:
    """Import an eval as the pytest run that launched its job did, before resuming it.

    Collects the eval's file (``--collect-only``, nothing runs) from the run's directory with
    its ``rootdir``, so its ``conftest.py`` files, import mode and ``sys.path`` entries are
    pytest's, and the module's tools and ``register_mock`` calls are what the job names.

    Raises:
        error: the file is gone or pytest cannot collect it (with pytest's words and the fix).
    """
    import contextlib
    import io
    import os

    import pytest

    nodeid, rootdir = origin.get("nodeid", "?"), origin.get("rootdir", ".")
    fix = f"or run `pytest --fxtr-resume {nodeid}` in {rootdir}"
    file = origin.get("file")
    if not file or not os.path.isfile(file):
        msg = (
            f"the eval {nodeid} was launched by pytest from {file}, which is gone: "
            f"restore it, {fix}."
        )
        raise error(msg)
    here = os.getcwd()
    there = origin.get("dir") or rootdir
    output = io.StringIO()
    args = [file, "--collect-only", "-q", "-p", "no:cacheprovider", "--rootdir", rootdir]
    try:
        os.chdir(there if os.path.isdir(there) else rootdir)
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            code = pytest.main(args, plugins=[_InThisProcess()])
    finally:
        os.chdir(here)
    if code != 0:
        tail = "\n".join(output.getvalue().strip().splitlines()[-15:])
        msg = (
            f"pytest could not collect the eval {nodeid} to resume its job (exit {int(code)}):"
            f"\n{tail}\nFix the error above, {fix}."
        )
        raise error(msg)
