"""docs/agents.md: its calculator agent eval (two models, three samples, a gate) is at most
20 lines and runs under pytest; every other Python block on the page runs as written."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

PAGE = Path(__file__).parent.parent / "docs" / "agents.md"
BLOCK = re.compile(r"(<!-- fxtr: no-run -->\n)?```python\n(.*?)```", re.S)


def _blocks() -> list[str]:
    return [code for skip, code in BLOCK.findall(PAGE.read_text()) if not skip]


def test_the_calculator_agent_eval_is_at_most_20_lines_and_passes_its_gate(pytester):
    """Two models x two cases x three samples, tool calls and all, gate passed."""
    calculator = _blocks()[0]
    assert 'samples": 3' in calculator and "threshold=" in calculator
    assert len([line for line in calculator.splitlines() if line.strip()]) <= 20
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_calculator=calculator)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    text = result.stdout.str()
    assert "gate passed" in text or "passed" in text.split("fxtr summary")[1]
    rerun = pytester.runpytest("-p", "no:cacheprovider", "--fxtr-report", "report.json")
    rerun.assert_outcomes(passed=4)
    import json

    (job,) = json.loads((pytester.path / "report.json").read_text())["jobs"]
    assert job["status"] == "succeeded"
    assert all(i["from_cache"] for i in job["invocations"])  # the rerun asked nothing
    turns = [i for i in job["invocations"] if i["step"] == "fxtr.agents.turn"]
    assert len(turns) == 2 * 2 * 3 * 2  # models x cases x samples x (call, answer)
    assert all(g["passed"] for g in job["scores"])


@pytest.mark.parametrize("index", range(1, len(_blocks())))
def test_every_other_block_on_the_page_runs(index):
    """The page's examples are runnable as written."""
    runpy.run_path(str(_write(index)), run_name=f"agents_doc_block_{index}")


def _write(index: int) -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp()) / f"agents_doc_block_{index}.py"
    path.write_text(_blocks()[index])
    return path
