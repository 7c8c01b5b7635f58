"""The dry run's forecast against what the real run then does (DESIGN §14, issue 37 item 4).

Judges that grade several times or a gold set, agents whose turns are not known before they
run, and tokens as well as dollars: each compared with the real run that follows, from the
user's side (subprocess pytest).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

JUDGED = textwrap.dedent(
    """
    import os

    import pytest

    from fxtr.evals import Case, evaluate, mock_judge, model_graded_fact, register_mock

    N = int(os.environ.get("EVAL_CASES", "5"))
    FIRST = int(os.environ.get("EVAL_FIRST", "0"))
    GOLD = [
        Case(id=f"g{i}", input=f"Capital {i}?", target="Paris",
             metadata={"completion": "Paris" if i % 2 else "Rome", "label": i % 2})
        for i in range(4)
    ]
    CASES = [Case(id=f"c{i}", input=f"What is number {i}?", target=str(i))
             for i in range(FIRST, FIRST + N)]
    MODEL = register_mock("fc-subject", lambda r: "It is " + "many " * 30,
                          price_as="gpt-5-mini")
    JUDGE = mock_judge("fc-judge", price_as="gpt-4o-mini")
    SCORER = model_graded_fact(JUDGE, judge_samples=3, calibration=GOLD)

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": SCORER})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_judged(model, case, result):
        assert result is not None
    """
)

AGENT = textwrap.dedent(
    """
    import os

    import pytest

    from fxtr.agents import Agent, tool, tool_call
    from fxtr.evals import Case, evaluate, includes, register_mock

    N = int(os.environ.get("EVAL_CASES", "4"))
    FIRST = int(os.environ.get("EVAL_FIRST", "0"))

    @tool
    def add(a: int, b: int) -> int:
        \"\"\"Add two numbers.\"\"\"
        return a + b

    def script(request):
        turns = sum(type(m).__name__ == "AssistantMessage" for m in request.context)
        if turns < 2:
            return tool_call("add", a=turns, b=1)
        return "done: " + "word " * 20

    MODEL = register_mock("fc-agent", script, price_as="gpt-5-mini")
    CASES = [Case(id=f"c{i}", input=f"Add things {i}", target="done")
             for i in range(FIRST, FIRST + N)]

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes(), "agent": Agent(tools=(add,))})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_agent(model, case, result):
        assert result is not None
    """
)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def _report(pytester: pytest.Pytester, name: str) -> dict:
    return json.loads(Path(pytester.path / name).read_text())


def _project(pytester: pytest.Pytester, source: str) -> pytest.Pytester:
    pytester.makepyfile(test_eval=source)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def _real_by_model(report: dict) -> dict[str, dict]:
    return report["jobs"][0]["cost"]["by_model"]


def test_dry_run_counts_every_judge_call_of_judge_samples_and_a_gold_set(pytester):
    project = _project(pytester, JUDGED)
    dry = _run(project, "--fxtr-dry-run", "--fxtr-report", "dry.json")
    assert dry.ret == 0
    (plan,) = _report(project, "dry.json")["dry_run"]
    real = _run(project, "--fxtr-report", "real.json")
    real.assert_outcomes(passed=5)
    by_model = _real_by_model(_report(project, "real.json"))
    # 5 answers, 5 x 3 judge samples and 4 gold cases x 3 judge samples: 5 + 15 + 12
    assert by_model["fc-judge"]["calls"] == 27 and by_model["fc-subject"]["calls"] == 5
    rows = {row["model"]: row for row in plan["by"] if row["calls"]}
    assert rows["mock/fc-judge"]["calls"] == 27 and rows["mock/fc-subject"]["calls"] == 5
    assert plan["calls"] == 32 and plan["at_least"] is False
    assert plan["unpriced"] == 0 and plan["usd"] is not None
    assert "n/a" not in "\n".join(dry.stdout.lines)
    # tokens are forecast too: the question's as the mock counts them; cold, an answer is
    # 256 tokens (DESIGN §14), and each judge's prompt quotes the answer it grades
    subject, judge = rows["mock/fc-subject"], rows["mock/fc-judge"]
    assert subject["input_tokens"] == by_model["fc-subject"]["input_tokens"]
    assert subject["output_tokens"] == 5 * 256
    assert judge["input_tokens"] > by_model["fc-judge"]["input_tokens"] + 15 * 200
    # a guess is said to be one: every call of this cold plan, marked in the table and told
    assert subject["assumed_output_calls"] == 5 and judge["assumed_output_calls"] == 27
    text = "\n".join(dry.stdout.lines)
    assert "1280*" in text, text
    assert "* 32 call(s) of models with no history in the store and no" in text


def test_a_judged_rerun_with_new_cases_is_forecast_from_history_within_20_percent(
    pytester, monkeypatch
):
    project = _project(pytester, JUDGED)
    _run(project).assert_outcomes(passed=5)
    monkeypatch.setenv("EVAL_FIRST", "5")
    dry = _run(project, "--fxtr-dry-run", "--fxtr-report", "dry.json")
    assert "no history in the store" not in "\n".join(dry.stdout.lines)
    (plan,) = _report(project, "dry.json")["dry_run"]
    assert plan["assumed_output_calls"] == 0
    _run(project, "--fxtr-report", "real.json").assert_outcomes(passed=5)
    by_model = _real_by_model(_report(project, "real.json"))
    rows = {row["model"]: row for row in plan["by"] if row["calls"]}
    # the gold set is cached: only the new answers and their 3 grades each run
    assert rows["mock/fc-judge"]["calls"] == by_model["fc-judge"]["calls"] == 15
    for name, real_row in by_model.items():
        row = rows[f"mock/{name}"]
        assert row["usd"] == pytest.approx(real_row["usd"], rel=0.2)
        assert row["output_tokens"] == pytest.approx(real_row["output_tokens"], rel=0.2)


def test_an_agent_eval_is_at_least_one_turn_per_trajectory_then_median_turns(pytester, monkeypatch):
    project = _project(pytester, AGENT)
    dry = _run(project, "--fxtr-dry-run", "--fxtr-report", "dry.json")
    assert dry.ret == 0
    (plan,) = _report(project, "dry.json")["dry_run"]
    assert plan["at_least"] is True
    rows = {row["model"]: row for row in plan["by"] if row["calls"]}
    assert rows["mock/fc-agent"]["calls"] == 4  # one turn at least per trajectory
    assert rows["mock/fc-agent"]["usd"] is not None and rows["mock/fc-agent"]["usd"] > 0
    dry.stdout.fnmatch_lines(["*test_agent: at least * invocation(s) would run, at least 4 model*"])
    _run(project, "--fxtr-report", "first.json").assert_outcomes(passed=4)
    first = _real_by_model(_report(project, "first.json"))["fc-agent"]
    assert first["calls"] == 12  # three turns a trajectory
    monkeypatch.setenv("EVAL_FIRST", "4")
    _run(project, "--fxtr-dry-run", "--fxtr-report", "dry2.json")
    (plan,) = _report(project, "dry2.json")["dry_run"]
    rows = {row["model"]: row for row in plan["by"] if row["calls"]}
    _run(project, "--fxtr-report", "real.json").assert_outcomes(passed=4)
    real = _real_by_model(_report(project, "real.json"))["fc-agent"]
    assert rows["mock/fc-agent"]["calls"] == real["calls"] == 12  # the median turns: 3
    assert rows["mock/fc-agent"]["usd"] == pytest.approx(real["usd"], rel=0.2)


HUGE = textwrap.dedent(
    """
    import os

    import pytest

    from fxtr.evals import Case, Model, evaluate, includes, register_mock
    from fxtr.models import Sampling

    register_mock("gpt-5-mini", "An answer.")
    MODEL = Model("mock/gpt-5-mini", sampling=Sampling(max_tokens=int(os.environ["MAX_TOKENS"])))
    CASES = [Case(id=f"c{i}", input="Q" * 39 + str(i), target="x") for i in range(5)]

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes()})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_huge(model, case, result):
        assert result is not None
    """
)


@pytest.mark.parametrize("max_tokens", [10**9, 10**12])
def test_a_huge_max_tokens_is_forecast_arithmetically(pytester, monkeypatch, max_tokens):
    """Issue 36 item 10: 10^12 forecast "0 invocations, $0.0000"; 10^9 took 280 s and GBs."""
    import subprocess
    import sys
    import time

    project = _project(pytester, HUGE)
    monkeypatch.setenv("MAX_TOKENS", str(max_tokens))
    started = time.monotonic()
    # its own process, whose peak it reads itself (VmHWM of its own memory map): the maxrss of a
    # child counts the image it was forked from (an xdist worker of 400 MiB), not its own use
    measure = (
        "import pathlib, sys, pytest\n"
        "code = pytest.main(['-p', 'no:cacheprovider', '--fxtr-dry-run', '--fxtr-report', "
        "'dry.json'])\n"
        "status = pathlib.Path('/proc/self/status').read_text()\n"
        "kib = [l for l in status.splitlines() if l.startswith('VmHWM:')][0].split()[1]\n"
        "pathlib.Path('peak.txt').write_text(kib)\n"
        "sys.exit(code)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", measure],
        cwd=project.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    seconds = time.monotonic() - started
    assert child.returncode == 0
    (plan,) = _report(project, "dry.json")["dry_run"]
    assert plan["error"] is None and plan["invocations"] == 10 and plan["calls"] == 5
    # gpt-5-mini: $0.25 per million input tokens, $2 per million output tokens; 40
    # characters of question are 10 input tokens
    expected = 5 * (10 * 0.25 + max_tokens * 2.0) / 1e6
    assert plan["usd"] == pytest.approx(expected, rel=1e-9)
    (row,) = [r for r in plan["by"] if r["calls"]]
    assert row["output_tokens"] == 5 * max_tokens and row["input_tokens"] == 50
    assert seconds < 60
    peak = int((project.path / "peak.txt").read_text()) * 1024
    assert peak < 400 * 2**20, f"the dry run took {peak / 2**20:.0f} MiB"


@pytest.mark.parametrize("bad", [-1, 0])
def test_a_max_tokens_below_one_is_refused_naming_the_field(pytester, monkeypatch, bad):
    project = _project(pytester, HUGE)
    monkeypatch.setenv("MAX_TOKENS", str(bad))
    dry = _run(project, "--fxtr-dry-run")
    assert dry.ret != 0
    text = "\n".join(dry.stdout.lines + dry.stderr.lines)
    assert f"Sampling(max_tokens={bad}): max_tokens must be 1 or more" in text
    assert "$0.0000" not in text
