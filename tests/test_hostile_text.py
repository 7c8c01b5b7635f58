"""Secrets and hostile text in what fxtr prints (issue 36 item 11).

A password in ``OTEL_EXPORTER_OTLP_ENDPOINT`` never reaches the export warning. Case ids and
error texts holding line feeds, escape codes and GitHub Actions workflow commands
(``\\n::error::``) reach neither pytest's terminal nor `fxtr show -v` raw: no line of the
output starts with ``::`` and no escape code gets through.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

from fxtr.report._redaction import escape_controls, terminal_safe
from fxtr.secrets import redact
from tests.test_agree_cli import fxtr

EVAL = textwrap.dedent(
    """
    from typing import Annotated

    import pytest

    from fxtr import ArrayHandle, BoundID, StepContext, WorkflowContext, step, workflow
    from fxtr.evals import Case

    @step(name="h.score")
    async def score(context: StepContext, case: Case) -> float:
        if isinstance(case, BoundID):
            case = await context.load(case)
        if case.input == "bad":
            raise RuntimeError("boom\\n::error::from-the-error \\x1b[31mred\\r::warning::cr")
        return 1.0

    @workflow(name="h.evaluate")
    async def evaluate(
        context: WorkflowContext, case: Annotated[ArrayHandle[Case], "[case: str]"]
    ) -> Annotated[ArrayHandle[float], "[case: str]"]:
        return context.run_step("score", score, {"case": case}, map_over=["case"])

    CASES = [
        Case(id="ok\\n::error::from-the-id", input="fine"),
        Case(id="red\\x1b[31m\\u2028::notice::sep", input="bad"),
        Case(id="::warning::at-the-start", input="fine"),
    ]

    @pytest.mark.fxtr(evaluate, dims={"case": "case"})
    @pytest.mark.parametrize("case", CASES)
    def test_h(case, result):
        assert result == 1.0
    """
)

PASSWORD = "s3cr3t-passw0rd"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _commands(text: str) -> list[str]:
    """Lines a CI runner would read as workflow commands (it trims leading blanks)."""
    lines = text.replace("\r", "\n").replace("\u2028", "\n").splitlines()
    return [line for line in lines if line.lstrip().startswith("::")]


def test_hostile_ids_and_errors_never_start_a_line_and_the_otel_password_is_hidden(pytester):
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_h=EVAL)
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://fxtr:{PASSWORD}@127.0.0.1:{_closed_port()}"
    env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "1"
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "test_h.py", "-v", "-rA", "-p", "no:cacheprovider",
         "--fxtr-otel"],
        cwd=pytester.path, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    output = ran.stdout + ran.stderr
    assert ran.returncode == 1, output  # the bad case fails
    assert "from-the-id" in output and "from-the-error" in output  # shown, escaped
    assert _commands(output) == [], _commands(output)
    assert "\x1b" not in output and "\u2028" not in output
    assert "\\n::error::from-the-id" in output  # the id as pytest would have escaped it
    # the export warning names the collector, not its password
    (warning,) = [line for line in output.splitlines() if "OpenTelemetry export" in line]
    assert "fxtr:[redacted]@127.0.0.1" in warning
    assert PASSWORD not in output
    for args in (["show", "-v", "latest"], ["jobs"]):
        shown = fxtr(pytester.path, *args)
        assert shown.returncode in (0, 1), shown.stderr
        text = shown.stdout + shown.stderr
        assert _commands(text) == [] and "\x1b" not in text, text
    shown = fxtr(pytester.path, "show", "-v", "latest").stdout
    assert "boom\\n::error::from-the-error \\x1b[31mred\\r::warning::cr" in shown


GROUPED = textwrap.dedent(
    """
    from typing import Annotated

    import pytest

    from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow

    @step(name="g.score")
    async def score(context: StepContext, model: str, case: str) -> float:
        return 1.0

    @workflow(name="g.evaluate")
    async def evaluate(
        context: WorkflowContext,
        model: Annotated[ArrayHandle[str], "[model: str]"],
        case: Annotated[ArrayHandle[str], "[case: str]"],
    ) -> Annotated[ArrayHandle[float], "[model: str, case: str]"]:
        return context.run_step("score", score, {"model": model, "case": case},
                                map_over=["model", "case"])

    HOSTILE = "<img src=x onerror=alert(1)>![t](http://t.test/p)[a](javascript:x)|c\x1b[31m"

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"})
    @pytest.mark.parametrize("model", [HOSTILE])
    @pytest.mark.parametrize("case", ["a", "b"])
    def test_g(model, case, result):
        assert result == 1.0
    """
)


def test_a_hostile_group_makes_no_tag_image_link_or_cell_in_the_markdown_summary(pytester):
    """GitHub's step summary renders Markdown and some HTML: text of the run reads as itself."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_g=GROUPED)
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "test_g.py", "-p", "no:cacheprovider",
         "--fxtr-markdown", "summary.md"],
        cwd=pytester.path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    markdown = (pytester.path / "summary.md").read_text()
    assert "\x1b" not in markdown and _commands(markdown) == [], markdown
    assert "<img" not in markdown.replace("\\<img", "") and "](" not in markdown, markdown
    (row,) = [line for line in markdown.splitlines() if "onerror" in line]
    assert row.count(" | ") == 7, row  # its own cells only
    assert "\\<img src=x onerror=alert(1)>![t]\\(http://t.test/p)[a]\\(javascript:x)\\|c" in row


def test_the_escapes_themselves():
    """Every control character is escaped in a one-line text, lines are kept otherwise; a
    printed line starting with ``::`` is guarded; URLs lose their passwords only."""
    hostile = "a\n::error::x\x1b[31m\r\u2028\x00\x7f\x85"
    one = escape_controls(hostile)
    assert "\n" not in one and "\x1b" not in one and "\u2028" not in one
    assert one == "a\\n::error::x\\x1b[31m\\r\\u2028\\x00\\x7f\\x85"
    assert escape_controls("::add-mask::x") == "::add-mask::x"  # a key, kept as pytest would
    assert terminal_safe(escape_controls(" ::add-mask::x")) == "\\ ::add-mask::x"
    assert escape_controls("caf\u00e9 q") == "caf\u00e9 q"  # printable text is left alone
    kept = terminal_safe("ok\n  ::error::x\n\tfine::y\n\x1b[1mbold")
    assert kept == "ok\n\\  ::error::x\n\tfine::y\n\\x1b[1mbold"
    assert redact("to https://u:pw123@h:1/v1 and postgresql://fxtr:***@db/x") == (
        "to https://u:[redacted]@h:1/v1 and postgresql://fxtr:***@db/x"
    )
    assert redact("mail me@example.com, see https://example.com/a@b") == (
        "mail me@example.com, see https://example.com/a@b"
    )
