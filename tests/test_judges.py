"""Judges you can trust (DESIGN §15): gold sets, corrected scores, K verdicts, pairwise."""

from __future__ import annotations

import json
import math
import random
import re
import textwrap

import pytest

import fxtr
from fxtr.evals import (
    Case,
    evaluate,
    model_graded_fact,
    model_graded_qa,
    pairwise,
    register_mock,
    user_text,
)
from fxtr.evals._judging import majority, mode
from fxtr.experiment.arrays import Array
from fxtr.stats import corrected_proportion, proportion_ci

# --------------------------------------------------------------------------- bad input

GOOD = {"completion": "Paris", "label": 1}


def _gold(i, **metadata):
    return Case(id=f"g{i}", input="Capital of France?", target="Paris", metadata=metadata)


@pytest.mark.parametrize("builder", [model_graded_qa, model_graded_fact])
def test_gold_cases_without_completion_or_label_name_the_case_and_the_fix(builder):
    judge = register_mock("tj-any", "GRADE: C")
    with pytest.raises(ValueError, match=r"gold case 'g1' has no 'label'.*metadata\['label'\]"):
        builder(judge, calibration=[_gold(0, **GOOD), _gold(1, completion="Paris")])
    with pytest.raises(ValueError, match=r"gold case 'g0' has no 'completion' and no 'label'"):
        builder(judge, calibration=[_gold(0)])
    with pytest.raises(ValueError, match=r"gold case 'g0' has no 'completion'.*add those columns"):
        builder(judge, calibration=[_gold(0, label=1)])


@pytest.mark.parametrize("label", [2, -1, 0.5, "yes", None, "pass"])
def test_labels_other_than_0_or_1_are_refused(label):
    judge = register_mock("tj-any", "GRADE: C")
    with pytest.raises(ValueError, match=r"gold case 'g0' has label .*1 .* or 0 .*relabel"):
        model_graded_qa(judge, calibration=[_gold(0, completion="Paris", label=label)])


def test_labels_written_as_text_or_bools_are_read():
    judge = register_mock("tj-any", "GRADE: C")
    scorer = model_graded_qa(
        judge,
        calibration=[_gold(i, completion="x", label=v) for i, v in enumerate(["1", "0", True, 0.0])],
    )
    assert len(scorer.calibration) == 4


def test_other_bad_gold_sets():
    judge = register_mock("tj-any", "GRADE: C")
    with pytest.raises(TypeError, match="takes fxtr.evals.Case gold cases"):
        model_graded_qa(judge, calibration=[{"completion": "x", "label": 1}])
    with pytest.raises(ValueError, match="appears twice"):
        model_graded_qa(judge, calibration=[_gold(0, **GOOD), _gold(0, **GOOD)])
    no_target = Case(id="g9", input="q", metadata=GOOD)
    with pytest.raises(ValueError, match="gold case 'g9' has no target"):
        model_graded_qa(judge, calibration=[no_target])


@pytest.mark.parametrize("k", [0, -2, 1.5, True, "3"])
def test_judge_samples_below_one_are_refused(k):
    judge = register_mock("tj-any", "GRADE: C")
    with pytest.raises(ValueError, match=r"judge_samples=.*at least once.*>= 1"):
        model_graded_qa(judge, judge_samples=k)
    with pytest.raises(ValueError, match=r"judge_samples"):
        pairwise(judge, against=judge, judge_samples=k)


def test_pairwise_needs_models():
    judge = register_mock("tj-any", "GRADE: C")
    with pytest.raises(TypeError, match="pairwise.against."):
        pairwise(judge, against="openai/gpt-5")
    with pytest.raises(ValueError, match="two answers at once.*fxtr.evaluate"):
        pairwise(judge, against=judge).grade(_gold(0, **GOOD), "Paris")


# --------------------------------------------------------------------------- majority


def test_majority_and_mode():
    assert majority([1, 1, 0]) == 1.0 and majority([0, 0, 1]) == 0.0
    assert majority([1, 0]) == 0.5  # an even split
    assert majority([0.5, 1.0, 1.0]) == pytest.approx(2.5 / 3)  # partial credit: the mean
    assert majority([7.0, 8.0, 9.0]) == 8.0
    assert mode([1.0, 0.0, 1.0]) == 1.0 and mode([1.0, 0.0]) == 0.5 and mode([0.5]) == 0.5
    with pytest.raises(ValueError):
        majority([])


# --------------------------------------------------------------------------- the workflow

QUESTIONS = {f"q{i}": ("Paris" if i % 3 else "Rome") for i in range(9)}
CASES = [Case(id=f"c{i}", input=f"q{i}", target="Paris") for i in range(9)]
JUDGE_CALLS: list[str] = []


def _field(prompt, name):
    found = re.search(rf"\[{name}\]: (.*?)\n\*\*\*", prompt, re.DOTALL)
    return found.group(1).strip() if found else ""


def _noisy(request):
    """Right on plain answers; on 'Maybe ...' answers a coin flipped per (answer, seed)."""
    prompt = user_text(request)
    answer, criterion = _field(prompt, "Submission"), _field(prompt, "Criterion")
    seed = request.sampling.seed if request.sampling else None
    JUDGE_CALLS.append(f"{answer}/{seed}")
    right = criterion in answer
    if answer.startswith("Maybe"):
        right = random.Random(f"{answer}/{seed}").random() < 0.5
    return f"GRADE: {'C' if right else 'I'}"


NOISY = register_mock("tj-noisy", _noisy)
SUBJECT = register_mock("tj-subject", lambda r: QUESTIONS[user_text(r)])
GOLD = [
    Case(id=f"g{i}", input=f"gold {i}", target="Paris",
         metadata={"completion": text, "label": label})
    for i, (text, label) in enumerate(
        [("Paris", 1), ("Paris!", 1), ("Maybe Paris", 1), ("Maybe Paris?", 1), ("Rome", 0),
         ("Lyon", 0), ("Maybe Rome", 0), ("Maybe Nice", 0), ("Maybe Lille", 0), ("Nice", 0)]
    )
]


def _inputs(scorer, samples=1, models=(SUBJECT,), cases=CASES):
    return {
        "model": Array.from_mapping({m.name: m for m in models}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": scorer,
        "samples": samples,
    }


@pytest.fixture(autouse=True)
def _clear():
    JUDGE_CALLS.clear()


def test_gold_cases_are_graded_as_cached_judge_steps_and_reuse_the_cached_grades(tmp_path):
    store = tmp_path / "s"
    plain = fxtr.run(evaluate, _inputs(model_graded_qa(NOISY)), store=store)
    assert plain.status == "succeeded"
    JUDGE_CALLS.clear()
    calibrated = fxtr.run(evaluate, _inputs(model_graded_qa(NOISY, calibration=GOLD)), store=store)
    assert calibrated.status == "succeeded"
    by_step: dict[str, list] = {}
    for inv in calibrated.invocations:
        by_step.setdefault(inv.step, []).append(inv)
    # the answers' grades come from the cache: adding a gold set changes nothing they depend on
    assert all(i.from_cache for i in by_step["fxtr.score"] + by_step["fxtr.generate"])
    gold = by_step["fxtr.judge_gold"]
    assert sorted(i.address.rsplit("/", 1)[1] for i in gold) == sorted(
        f"calibration[gold=g{i},judge_sample=0]" for i in range(10)
    )
    assert not any(i.from_cache for i in gold) and len(JUDGE_CALLS) == 10
    assert all(c["role"] == "judge" for i in gold for c in i.model_calls)
    assert json.loads(gold[0].result_text)["label"] in (0, 1)
    JUDGE_CALLS.clear()
    again = fxtr.run(evaluate, _inputs(model_graded_qa(NOISY, calibration=GOLD)), store=store)
    assert all(i.from_cache for i in again.invocations) and JUDGE_CALLS == []


def test_judge_samples_ask_k_times_vote_and_top_up(tmp_path):
    store = tmp_path / "s"
    maybe = register_mock("tj-maybe", lambda r: "Maybe " + QUESTIONS[user_text(r)])
    three = fxtr.run(evaluate, _inputs(model_graded_qa(NOISY, judge_samples=3), models=(maybe,)),
                     store=store)
    assert three.status == "succeeded"
    judge_steps = [i for i in three.invocations if i.step == "fxtr.judge"]
    assert len(judge_steps) == 9 * 3
    assert all(re.search(r"judge_sample=[0-2]\]$", i.address) for i in judge_steps)
    for (_model, case, _sample), score in three.output.items():
        answer = "Maybe " + QUESTIONS[f"q{case[1:]}"]
        votes = [random.Random(f"{answer}/{j}").random() < 0.5 for j in range(3)]
        assert score.value == (1.0 if sum(votes) >= 2 else 0.0), (case, votes)
        assert score.explanation.startswith("3 judge samples: ")
    JUDGE_CALLS.clear()
    five = fxtr.run(evaluate, _inputs(model_graded_qa(NOISY, judge_samples=5), models=(maybe,)),
                    store=store)
    assert five.status == "succeeded"
    assert sorted({c.rsplit("/", 1)[1] for c in JUDGE_CALLS}) == ["3", "4"]  # only the new ones


def test_pairwise_asks_both_orders_and_an_order_dependent_verdict_is_a_tie(tmp_path):
    def first_read(request):
        prompt = user_text(request)
        a, b = _field(prompt, "Answer A"), _field(prompt, "Answer B")
        if ("Paris" in a) != ("Paris" in b):
            return f"GRADE: {'A' if 'Paris' in a else 'B'}"
        return "GRADE: A"  # alike: the first one read

    judge = register_mock("tj-first-read", first_read)
    other = register_mock("tj-other", lambda r: "Paris")
    result = fxtr.run(evaluate, _inputs(pairwise(judge, against=other)), store=tmp_path / "s")
    assert result.status == "succeeded"
    steps = [i for i in result.invocations if i.step == "fxtr.pairwise"]
    assert len(steps) == 9 * 2 and {i.address[-9:] for i in steps} == {"order=AB]", "order=BA]"}
    assert all(c["role"] == "judge" for i in steps for c in i.model_calls)
    against = [i for i in result.invocations if "/against[" in i.address]
    assert len(against) == 9  # the reference model answered each case once
    for (_, case, _), score in result.output.items():
        subject = QUESTIONS[f"q{case[1:]}"]
        # Rome loses in both orders; Paris vs Paris: A wins each time, so the order decides
        assert score.value == (0.0 if subject == "Rome" else 0.5), case


# --------------------------------------------------------------------------- through pytest

MODULE = """
import pytest
from fxtr.evals import Case, evaluate, model_graded_qa, register_mock, user_text

def field(prompt, name):
    start = prompt.index("[" + name + "]: ") + len(name) + 4
    return prompt[start:prompt.index("\\n***", start)].strip()

def judge(request):
    prompt = user_text(request)
    answer, criterion = field(prompt, "Submission"), field(prompt, "Criterion")
    right = criterion in answer
    if answer.startswith("Sure"):
        right = True  # fooled by confidence
    if INVERTED:
        right = not right
    return "GRADE: " + ("C" if right else "I")

INVERTED = False
JUDGE = register_mock("pj-judge", judge)
ANSWERS = __ANSWERS__
SUBJECT = register_mock("pj-subject", lambda r: ANSWERS[user_text(r)])
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

# 10 answers: 5 right, 3 confidently wrong (the judge passes them), 2 plainly wrong
ANSWERS = {f"q{i}": a for i, a in enumerate(
    ["Paris"] * 5 + ["Sure: Rome"] * 3 + ["Rome"] * 2
)}
# gold: 12 positives all passed (q1 = 1); 12 negatives of which 4 confident (q0 = 8/12); the
# Wilson lower bounds sum to 1.148 > 1: usable (with 6 and 6 they would sum to 0.910)
GOLD_ROWS = [("Paris", 1)] * 12 + [("Sure: Lyon", 0)] * 4 + [("Lyon", 0)] * 8


def _project(pytester, threshold, inverted=False):
    source = MODULE.replace("__ANSWERS__", repr(ANSWERS)).replace("__GOLD__", repr(GOLD_ROWS))
    source = source.replace("__THRESHOLD__", repr(threshold))
    if inverted:
        source = source.replace("INVERTED = False", "INVERTED = True")
    pytester.makepyfile(test_judged=textwrap.dedent(source))
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def _run(pytester, *args):
    result = pytester.runpytest("-p", "no:cacheprovider", "--fxtr-report", "report.json",
                                "--fxtr-markdown", "summary.md", *args)
    report = json.loads((pytester.path / "report.json").read_text())
    (job,) = report["jobs"]
    (group,) = job["scores"]
    return result, group


def test_the_report_gives_q0_q1_and_the_corrected_value_which_the_gate_uses(pytester):
    _project(pytester, threshold=0.7)
    result, group = _run(pytester)
    judge = group["judge"]
    # independent: the judge's verdicts follow from its rules; q0 = 8/12, q1 = 12/12
    assert judge["q0"]["n"] == 12 and judge["q0"]["value"] == pytest.approx(8 / 12)
    assert judge["q1"]["n"] == 12 and judge["q1"]["value"] == 1.0
    wilson = proportion_ci(8, 12)
    assert (judge["q0"]["low"], judge["q0"]["high"]) == pytest.approx((wilson.low, wilson.high))
    assert judge["usable"] is True and judge["flip_rate"] is None
    assert judge["position_inconsistency"] is None
    assert group["mean"] == pytest.approx(0.8)  # raw: 5 right + 3 fooled of 10
    theta = (0.8 + 4 / 6 - 1) / (4 / 6 + 1 - 1)
    var = (0.8 * 0.2 / 10 + (1 - theta) ** 2 * (4 / 6) * (2 / 6) / 12) / (4 / 6) ** 2
    corrected = group["corrected"]
    assert corrected["value"] == pytest.approx(theta) == pytest.approx(0.7)
    assert corrected["stderr"] == pytest.approx(math.sqrt(var))
    assert corrected["high"] == pytest.approx(min(1, theta + 1.959963984540054 * math.sqrt(var)))
    assert group["passed"] is True  # 0.7 >= 0.7
    summary = (pytester.path / "summary.md").read_text()
    assert "0.700" in summary and "q0 0.667" in summary
    result.assert_outcomes(passed=10)
    assert result.ret == 0


def test_a_raw_mean_over_the_threshold_fails_when_the_corrected_value_is_under(pytester):
    _project(pytester, threshold=0.75)  # raw 0.8 would pass; corrected 0.7 does not
    result, group = _run(pytester)
    assert group["mean"] == pytest.approx(0.8) and group["corrected"]["value"] < 0.75
    assert group["passed"] is False and result.ret == 1
    result.stdout.fnmatch_lines(["*score gate failed*corrected 0.700 < threshold 0.75*"])


def test_an_unusable_judge_is_reported_and_gated_on_the_raw_mean(pytester):
    _project(pytester, threshold=0.1, inverted=True)
    result, group = _run(pytester)
    judge = group["judge"]
    assert judge["q0"]["value"] + judge["q1"]["value"] <= 1
    assert judge["usable"] is False and group["corrected"] is None
    assert group["passed"] is True  # raw mean 0.2 >= 0.1: the raw gate
    result.stdout.fnmatch_lines(["*judge pj-judge is unusable*", "*gated on the raw mean*"])
    assert "unusable" in (pytester.path / "summary.md").read_text()


def test_the_audit_reads_flips_and_position_inconsistency_from_the_judge_steps():
    """judge_payload on hand-made records: counts checked against the definitions."""
    from fxtr.evals._audit import apply_judge, judge_payload

    class Inv:
        def __init__(self, step, address, value, **extra):
            self.step, self.address, self.status = step, address, "succeeded"
            self.result_text = json.dumps({"value": value, **extra})
            self.model_calls = [{"model": "j", "role": "judge"}]

    invs = [
        Inv("fxtr.judge", f"e/judge[model=m,case=c{c},sample=0,judge_sample={j}]", v)
        for c, votes in enumerate([(1, 1, 1), (1, 0, 1), (0, 0, 0), (0, 1, 0)])
        for j, v in enumerate(votes)
    ] + [
        Inv("fxtr.judge_gold", f"e/calibration[gold=g{g},judge_sample={j}]", v, label=label)
        for g, (label, votes) in enumerate([(1, (1, 1, 0)), (1, (0, 0, 1)), (0, (0, 0, 0))])
        for j, v in enumerate(votes)
    ]
    broken = Inv("fxtr.judge", "e/judge[model=m,case=c9,sample=0,judge_sample=0]", 1)
    broken.result_text = "{not json"
    audit = judge_payload([*invs, broken], ["model"])
    assert audit["gold"] == {
        "negatives": 1, "failed_negatives": 1, "positives": 2, "passed_positives": 1,
        "graded": 3, "flipped": 2, "wrong": ["g1"],
    }
    (group,) = audit["groups"]
    assert (group["answers"], group["flipped"]) == (4, 2)
    groups = [{"group": {"model": "m"}, "mean": 0.5, "n": 4, "range": [0.0, 1.0],
               "missing": 0, "incomplete": 0, "passed": True}]
    notes = apply_judge(groups, audit, 0.4)
    assert groups[0]["judge"]["flip_rate"] == 0.5
    assert groups[0]["judge"]["q1"]["value"] == 0.5 and groups[0]["judge"]["q0"]["value"] == 1.0
    # q0 + q1 = 1.5 > 1, but on 3 gold cases: the Wilson lower bounds sum to 0.301, so the
    # judge is unusable (corrected_proportion would say 1.000) and the raw gate stays
    assert corrected_proportion(0.5, 4, q0=1.0, m0=1, q1=0.5, m1=2).value == 1.0
    low = proportion_ci(1, 1).low + proportion_ci(1, 2).low
    assert low == pytest.approx(0.301, abs=1e-3)
    assert groups[0]["judge"]["usable"] is False and groups[0]["corrected"] is None
    assert groups[0]["gated_on"] == "raw" and groups[0]["passed"] is True
    assert len(notes) == 1 and f"sum to {low:.3f}, not above 1" in notes[0]
    pairs = [
        Inv("fxtr.pairwise", f"e/pairwise[model=m,case=c{c},sample=0,judge_sample=0,order={o}]", v)
        for c, (ab, ba) in enumerate([(1, 1), (1, 0), (0.5, 0.5), (0, 1)])
        for o, v in (("AB", ab), ("BA", ba))
    ]
    (pgroup,) = judge_payload(pairs, ["model"])["groups"]
    assert (pgroup["pairs"], pgroup["inconsistent"]) == (4, 2)


def test_a_plain_judge_keeps_its_fields_so_its_cached_grades_keep_their_fingerprints():
    """Only a judge asked for a gold set, K or a pairwise reference is an AuditedScorer."""
    from fxtr.evals import AuditedScorer, Scorer
    from fxtr.experiment._encoding import encode_text

    plain = model_graded_qa(NOISY)
    assert type(plain) is Scorer and not isinstance(plain, AuditedScorer)
    assert not {"calibration", "judge_samples", "against"} & set(json.loads(encode_text(plain))["v"])
    audited = model_graded_qa(NOISY, calibration=GOLD, judge_samples=3)
    assert isinstance(audited, AuditedScorer)
    assert audited.grader() == plain and type(audited.grader()) is Scorer
    assert type(pairwise(NOISY, against=SUBJECT).grader()) is Scorer


def test_gold_cases_belong_to_no_cell_of_the_matrix(pytester):
    """A cell opens its own answers' judge calls; the gold set's are not every cell's."""
    _project(pytester, threshold=0.5)
    _run(pytester)
    report = json.loads((pytester.path / "report.json").read_text())
    (job,) = report["jobs"]
    for cell in job["cells"]:
        assert cell["addresses"] and not any("/calibration[" in a for a in cell["addresses"])
    assert any("/calibration[" in i["address"] for i in job["invocations"])
