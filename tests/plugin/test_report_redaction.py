"""The JSON report and the Markdown summary never carry a credential (issue 15 item 9).

One key reaches the store in a step's error (the store redacts it); another reaches the
plugin itself, in a case id a user pasted it into: the report and summary writers redact too.
"""

from __future__ import annotations

import base64
import textwrap

KEY = "sk-proj-R3port9Secret8Value7Xyz6543210abcd"

EVAL = textwrap.dedent(
    """
    import os
    from typing import Annotated

    import pytest

    from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow

    @step(name="leak.call")
    async def call(context: StepContext, case: str) -> float:
        key = os.environ["OPENAI_API_KEY"]
        if case != "good" and not case.startswith("pasted"):
            raise RuntimeError(f"401 Incorrect API key provided: {key}")
        return 1.0

    @workflow(name="leak.evaluate")
    async def evaluate(
        context: WorkflowContext, case: Annotated[ArrayHandle[str], "[case: str]"]
    ) -> Annotated[ArrayHandle[float], "[case: str]"]:
        return context.run_step("call", call, {"case": case}, map_over=["case"])

    @pytest.mark.fxtr(evaluate, dims={"case": "case"}, threshold=0.5)
    @pytest.mark.parametrize("case", ["good", "bad", "pasted " + os.environ["OPENAI_API_KEY"]])
    def test_leak(case, result):
        assert result == 1.0
    """
)


def test_report_and_markdown_hold_no_key(pytester, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makepyfile(test_leak=EVAL)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-v", "--fxtr-report", "report.json",
        "--fxtr-markdown", "summary.md",
    )
    assert result.ret == 1
    forms = [KEY, KEY.removeprefix("sk-proj-"), base64.b64encode(KEY.encode()).decode()]
    texts = {
        "report": (pytester.path / "report.json").read_text(),
        "markdown": (pytester.path / "summary.md").read_text(),
        "step summary": summary.read_text(),
    }
    assert "[redacted]" in texts["report"]
    for name, text in texts.items():
        for form in forms:
            assert form not in text, f"{name} holds the key"
