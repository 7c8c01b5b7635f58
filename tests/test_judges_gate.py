"""A gate never passes on what was not measured (DESIGN §15, issue 36 item 3).

A judge barely better than chance is unusable (the Wilson lower bounds of its q0 and q1 sum
to at most 1): its groups are gated on their raw mean and the summary says so. No gate
passes on an interval that spans the whole range of the score, corrected or raw. Each
failed gate's line says which reason failed it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from fxtr.stats import corrected_proportion, proportion_ci

MODULE = """
import pytest
from fxtr.evals import Case, evaluate, model_graded_qa, register_mock, user_text

def field(prompt, name):
    start = prompt.index("[" + name + "]: ") + len(name) + 4
    return prompt[start:prompt.index("\\n***", start)].strip()

def judge(request):
    prompt = user_text(request)
    answer, criterion = field(prompt, "Submission"), field(prompt, "Criterion")
    right = criterion in answer or answer.startswith("Sure")  # fooled by confidence
    return "GRADE: " + ("C" if right else "I")

JUDGE = register_mock("jg-judge", judge)
ANSWERS = __ANSWERS__
SUBJECT = register_mock("jg-subject", lambda r: ANSWERS[user_text(r)])
CASES = [Case(id=q, input=q, target="Paris") for q in ANSWERS]
GOLD = [Case(id=f"g{i}", input="q", target="Paris", metadata={"completion": c, "label": l})
        for i, (c, l) in enumerate(__GOLD__)]

@pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"}, threshold=__THRESHOLD__,
                  inputs={"scorer": model_graded_qa(JUDGE, calibration=GOLD)})
@pytest.mark.parametrize("model", [SUBJECT])
@pytest.mark.parametrize("case", CASES)
def test_judged(model, case, result):
    pass
"""


def _run(pytester, answers, gold, threshold):
    source = MODULE.replace("__ANSWERS__", repr(answers)).replace("__GOLD__", repr(gold))
    pytester.makepyfile(test_judged=textwrap.dedent(source.replace("__THRESHOLD__", threshold)))
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--fxtr-report", "report.json", "--fxtr-markdown", "summary.md"
    )
    (job,) = json.loads((pytester.path / "report.json").read_text())["jobs"]
    (group,) = job["scores"]
    return result, group, (pytester.path / "summary.md").read_text()


def test_a_judge_barely_better_than_chance_is_unusable_and_its_raw_mean_fails_the_gate(pytester):
    """q0 0.55, q1 0.50 made a raw 0.600 'corrected 1.000 [0, 1]', which passed a 0.9 gate."""
    answers = {f"q{i:02d}": "Paris" if i < 12 else "Rome" for i in range(20)}  # 12/20 passed
    # 20 negatives, 9 of them passed (confident): q0 = 11/20; 20 positives, 10 of them failed
    # (lower case, not the criterion): q1 = 10/20
    gold = [("Sure: Lyon", 0)] * 9 + [("Lyon", 0)] * 11 + [("Paris", 1)] * 10
    gold += [("it is paris", 1)] * 10
    # what the old rule (q0 + q1 > 1) did with these figures: a gate of 0.9 passed
    old = corrected_proportion(0.6, 20, q0=0.55, m0=20, q1=0.5, m1=20)
    assert (old.value, old.low, old.high) == (1.0, 0.0, 1.0)
    result, group, markdown = _run(pytester, answers, gold, "0.9")
    judge = group["judge"]
    assert judge["q0"]["value"] == 0.55 and judge["q1"]["value"] == 0.5
    lows = proportion_ci(11, 20).low + proportion_ci(10, 20).low
    assert lows < 1 and judge["usable"] is False
    assert group["corrected"] is None and group["gated_on"] == "raw"
    assert group["mean"] == 0.6 and (group["low"], group["high"]) == (
        proportion_ci(12, 20).low, proportion_ci(12, 20).high)
    assert group["passed"] is False and result.ret == 1
    out = result.stdout.str()
    last = [line for line in out.splitlines() if "score gate failed" in line]
    assert len(last) == 1, out
    assert "mean 0.600 < threshold 0.900" in last[0]
    assert "judge unusable (not clearly better than chance): gated on the raw mean" in last[0]
    assert "95% CI [0.387, 0.781]" in last[0]
    assert f"sum to {lows:.3f}, not above 1" in " ".join(out.split())
    assert "judge unusable" in markdown
    assert "mean 0.600 < threshold 0.900" in markdown


def test_no_gate_passes_on_a_corrected_interval_that_spans_the_whole_range(pytester):
    """A usable judge (lower bounds 0.652 + 0.652) on 2 cases: corrected 0.500 [0, 1]."""
    answers = {"q0": "Paris", "q1": "Rome"}
    gold = [("Sure: Lyon", 0)] * 8 + [("Lyon", 0)] * 32 + [("Paris", 1)] * 32
    gold += [("it is paris", 1)] * 8
    assert proportion_ci(32, 40).low * 2 > 1
    est = corrected_proportion(0.5, 2, q0=0.8, m0=40, q1=0.8, m1=40)
    assert (est.value, est.low, est.high) == (0.5, 0.0, 1.0)  # 0.5 >= 0.5 passed before
    result, group, markdown = _run(pytester, answers, gold, "0.5")
    assert group["judge"]["usable"] is True and group["gated_on"] == "corrected"
    assert group["corrected"]["value"] == 0.5 and group["passed"] is False and result.ret == 1
    (line,) = [ln for ln in result.stdout.lines if "score gate failed" in ln]
    assert "corrected 0.500: its interval spans the whole range of the score [0.000, 1.000]" in line
    assert "95% CI [0.000, 1.000]" in line  # the corrected interval, not the raw one
    assert "| FAIL* |" in markdown and "* gated on the judge's corrected value" in markdown


def test_no_gate_passes_on_a_raw_interval_that_spans_the_whole_range(pytester):
    """Two cases scored 0.1 and 0.9: the mean's t interval on 1 df is clipped to [0, 1]."""
    pytester.makepyfile(
        test_two="""
        from typing import Annotated

        import pytest

        from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow

        @step(name="two.grade")
        async def grade(context: StepContext, case: str) -> float:
            return {"a": 0.1, "b": 0.9}[case]

        @workflow(name="two.flow")
        async def flow(
            context: WorkflowContext, case: Annotated[ArrayHandle[str], "[case: str]"]
        ) -> Annotated[ArrayHandle[float], "[case: str]"]:
            return context.run_step("grade", grade, {"case": case}, map_over=["case"])

        @pytest.mark.fxtr(flow, dims={"case": "case"}, threshold=0.5)
        @pytest.mark.parametrize("case", ["a", "b"])
        def test_two(case, result):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fxtr-report", "r.json")
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    (group,) = job["scores"]
    assert group["mean"] == 0.5 and (group["low"], group["high"]) == (0.0, 1.0)
    assert group["passed"] is False and result.ret == 1
    result.stdout.fnmatch_lines(
        ["*score gate failed*mean 0.500: its interval spans the whole range of the score*"]
    )


def test_every_judge_figure_shows_in_the_terminal_and_in_fxtr_show(pytester):
    """The judge line was cut at 100 columns (q1 and the flip rate lost, even with -v)."""
    answers = {f"q{i}": "Paris" if i < 6 else "Rome" for i in range(8)}
    gold = [("Paris", 1)] * 12 + [("Sure: Lyon", 0)] * 2 + [("Lyon", 0)] * 10
    source = MODULE.replace("__ANSWERS__", repr(answers)).replace("__GOLD__", repr(gold))
    source = source.replace("calibration=GOLD)", "calibration=GOLD, judge_samples=2)")
    source = source.replace('register_mock("jg-judge"', 'register_mock("jg-judge-with-a-long-name"')
    pytester.makepyfile(test_judged=textwrap.dedent(source.replace("__THRESHOLD__", "0.9")))
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fxtr-report", "r.json")
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    (group,) = job["scores"]
    assert group["gated_on"] == "corrected" and group["passed"] is False
    corrected, judge = group["corrected"], group["judge"]
    assert judge["flip_rate"] == 0.0
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if line.startswith("judge (model="))
    block = [lines[start]] + [ln for ln in lines[start + 1 : start + 4] if ln.startswith("    ")]
    text = " ".join(line.strip() for line in block)
    assert all(len(line) <= 100 for line in block) and "…" not in text
    q1 = judge["q1"]
    for figure in (
        f"corrected (the gate's) {corrected['value']:.3f} "
        f"[{corrected['low']:.3f}, {corrected['high']:.3f}]",
        f"q0 {judge['q0']['value']:.3f}",
        f"q1 {q1['value']:.3f} [{q1['low']:.3f}, {q1['high']:.3f}] n=12",
        "flip rate 0.000",
    ):
        assert figure in text, (figure, text)
    # the scores table marks the corrected gate, the failed gate's line pairs the corrected
    # value with the corrected interval (the raw one is another)
    assert any(line.rstrip().endswith("FAIL*") for line in lines)
    assert any(line.startswith("* gated on the judge's corrected value") for line in lines)
    (failed,) = [line for line in lines if "score gate failed" in line]
    assert f"corrected {corrected['value']:.3f} < threshold 0.900 (raw 0.750)" in failed
    assert f"95% CI [{corrected['low']:.3f}, {corrected['high']:.3f}]" in failed
    assert f"[{group['low']:.3f}, {group['high']:.3f}]" not in failed
    show = subprocess.run(
        [sys.executable, "-m", "fxtr.cli", "show", "latest"], cwd=pytester.path,
        capture_output=True, text=True, timeout=120,
    )
    assert show.returncode == 0, show.stderr
    shown = [line for line in show.stdout.splitlines() if line.startswith("  ")]
    start = next(i for i, line in enumerate(shown) if line.startswith("  judge (model="))
    text = " ".join(line.strip() for line in shown[start : start + 3])
    assert f"q1 {q1['value']:.3f} [{q1['low']:.3f}, {q1['high']:.3f}] n=12" in text
    assert "flip rate 0.000" in text and "corrected (the gate's)" in text
