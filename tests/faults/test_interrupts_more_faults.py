"""Issue 15, item 3: a step that raises CancelledError, KeyboardInterrupt or SystemExit."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.conftest import by_address, job


@pytest.mark.parametrize("kind,name", [("cancel", "CancelledError"),
                                       ("keyboard", "KeyboardInterrupt"),
                                       ("exit", "SystemExit")])
def test_a_step_raising_a_base_exception_is_a_failed_invocation(store: Path, kind: str,
                                                                 name: str) -> None:
    """The invocation fails with that error; the job is failed; no DeterminismError."""
    result = job({"store": str(store), "keys": ["k1", "k2"], "payload": f"{kind}@k1"})
    invs = by_address(result)
    bad = invs["faults.batch/work[case=k1]"]
    assert result["status"] == "failed", result
    assert bad["status"] == "failed", bad
    assert name in (bad["error"] or ""), bad
    assert invs["faults.batch/work[case=k2]"]["status"] == "succeeded"
    again = job({"store": str(store), "resume": result["job_id"]})
    assert again["attempt"] == 2 and again["status"] == "failed"
