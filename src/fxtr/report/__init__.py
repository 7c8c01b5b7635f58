"""Reading jobs back from the store: rows, reports, operation graphs, invocation details.

What the pytest summary, the ``--fxtr-report`` JSON, the ``fxtr`` command and the viewer show
is computed here once, from the store alone.
"""

from fxtr.report._judges import judge_lines
from fxtr.report._money import format_cost, format_usd
from fxtr.report._names import (
    attempt_status,
    find_store,
    job_records,
    newest_first,
    resolve_job,
)
from fxtr.report._redaction import escape_controls
from fxtr.report._values import render_value
from fxtr.report._views import (
    JobView,
    cost_of_invocations,
    invocation_detail,
    job_report,
    job_row,
    load_job,
    operation_graph,
    task_view,
    view_of,
)

__all__ = [
    "JobView",
    "attempt_status",
    "cost_of_invocations",
    "escape_controls",
    "find_store",
    "format_cost",
    "format_usd",
    "invocation_detail",
    "job_records",
    "judge_lines",
    "job_report",
    "job_row",
    "load_job",
    "newest_first",
    "operation_graph",
    "render_value",
    "resolve_job",
    "task_view",
    "view_of",
]
