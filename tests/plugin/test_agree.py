"""Results that agree (issue 27): the baseline `latest`, verdicts, cost by role, the summary.

Driven from a user's side with pytester: a real eval module, run as a user runs it.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

EVAL = textwrap.dedent(
    """
    import asyncio
    import hashlib
    import json
    import os
    from typing import Annotated

    import pytest

    from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow
    from fxtr.experiment.arrays import Array

    TABLE = json.loads(os.environ["SCORES"])
    FAIL = set(os.environ.get("FAIL", "").split(","))  # cases whose step raises
    SLOW = set(os.environ.get("SLOW", "").split(","))  # cases whose step hangs
    MODELS = sorted(TABLE)
    CASES = sorted(TABLE[MODELS[0]])
    # each model's own settings: changing one model's scores changes only its cells' inputs
    SALT = os.environ.get("SALT", "")  # another version of every model's settings
    VARIANTS = {
        m: hashlib.sha256((SALT + json.dumps(TABLE[m], sort_keys=True)).encode()).hexdigest()
        for m in MODELS
    }

    @step(name="m.score")
    async def score(context: StepContext, model: str, case: str, variant: str) -> float:
        if case in FAIL:
            raise ConnectionError(f"the scorer of {case} is down")
        if case in SLOW:
            await asyncio.sleep(600)
        return TABLE[model][case]

    @workflow(name="m.evaluate")
    async def evaluate(
        context: WorkflowContext,
        model: Annotated[ArrayHandle[str], "[model: str]"],
        case: Annotated[ArrayHandle[str], "[case: str]"],
        variant: Annotated[ArrayHandle[str], "[model: str]"],
    ) -> Annotated[ArrayHandle[float], "[model: str, case: str]"]:
        return context.run_step(
            "score", score, {"model": model, "case": case, "variant": variant},
            map_over=["model", "case"],
        )

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"variant": Array.from_mapping(VARIANTS, dims=["model"])})
    @pytest.mark.parametrize("model", MODELS)
    @pytest.mark.parametrize("case", CASES)
    def test_m(model, case, result):
        pass
    """
)


@pytest.fixture(autouse=True)
def _ini(pytester, monkeypatch):
    for name in ("GITHUB_STEP_SUMMARY", "FAIL", "SLOW", "SALT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def scores_of(a, b):
    """Ten cases per model: ``a`` and ``b`` are the lists of their scores."""
    return {
        "a": {f"c{i:02d}": v for i, v in enumerate(a)},
        "b": {f"c{i:02d}": v for i, v in enumerate(b)},
    }


def run(pytester, monkeypatch, table, *args):
    monkeypatch.setenv("SCORES", json.dumps(table))
    pytester.makepyfile(test_m=EVAL)
    result = pytester.runpytest("-p", "no:cacheprovider", "--fxtr-report", "r.json", *args)
    report = json.loads((pytester.path / "r.json").read_text())
    return result, report["jobs"][0]


def verdicts(job):
    return {g["group"]["model"]: g.get("baseline", {}).get("verdict") for g in job["scores"]}


def test_latest_skips_a_job_whose_changed_model_went_to_review(pytester, monkeypatch):
    """A run whose changed model awaited review is no baseline: `latest` is the run before.

    The regression 1.000 -> 0.300 of model a is caught (exit 1) against that earlier run;
    against the half-reviewed job, where a has no scores, a is `not compared`, never `no
    significant change`.
    """
    before = scores_of([1.0] * 10, [1.0] * 8 + [0.0] * 2)
    after = scores_of([1.0] * 3 + [0.0] * 7, [1.0] * 8 + [0.0] * 2)
    first, base = run(pytester, monkeypatch, before)
    assert first.ret == 0
    review, half = run(pytester, monkeypatch, after)
    assert review.ret == 1  # model a's cases await review
    assert half["status"] == "needs_review"
    latest, job = run(
        pytester,
        monkeypatch,
        after,
        "--fxtr-baseline",
        "latest",
        "--fxtr-cache-conflict",
        "overwrite",
    )
    assert latest.ret == 1, latest.stdout.str()
    assert verdicts(job) == {"a": "regressed", "b": "no significant change"}
    a = next(g for g in job["scores"] if g["group"] == {"model": "a"})
    assert a["baseline"]["job_id"] == base["job_id"] and a["baseline"]["n_paired"] == 10
    latest.stdout.fnmatch_lines([f"baseline: job {base['job_id']}"])
    assert latest.stdout.lines[-2].startswith("fxtr: regression in test_m.py::test_m (model=a)")
    # named explicitly, the half-reviewed job pairs nothing for model a: not compared
    explicit, job = run(pytester, monkeypatch, after, "--fxtr-baseline", half["job_id"])
    assert explicit.ret == 0
    assert verdicts(job) == {"a": "not compared", "b": "no significant change"}
    explicit.stdout.fnmatch_lines(["model=a*-*0.300*-*-*0*not compared"])


def test_latest_with_only_incomplete_earlier_jobs_is_a_note(pytester, monkeypatch):
    """Every earlier job left a case in review: no baseline, said why, and the run passes."""
    before = scores_of([1.0] * 10, [1.0] * 10)
    after = scores_of([0.0] * 10, [1.0] * 10)
    monkeypatch.setenv("SCORES", json.dumps(before))
    pytester.makepyfile(test_m=EVAL)
    assert pytester.runpytest("-p", "no:cacheprovider").ret == 0
    from fxtr.store import open_store

    store = open_store(pytester.path / ".fxtr")
    (only,) = [r["job_id"] for r in store.iter_jobs()]
    review, _ = run(pytester, monkeypatch, after)
    assert review.ret == 1
    # the complete first job is made another eval's: only the half-reviewed one is left
    record = store.get_job(only)
    record["evaluation"]["eval"] = "elsewhere.py::test_other"
    store.put_job(record)
    result, _ = run(pytester, monkeypatch, after, "--fxtr-baseline", "latest")
    result.stdout.fnmatch_lines(
        ["fxtr: no baseline: no earlier job of test_m.py::test_m has a complete evaluation (1*"]
    )


COST_EVAL = """
import pytest
from typing import Annotated
from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow
from fxtr.models import ContentText, MockModelAPI, ModelRequest, UserMessage
from fxtr.tracing._recorder import call_role

SUBJECT = MockModelAPI("gpt-4o-mini", "an answer " * 50)
JUDGE = MockModelAPI("gpt-4o-mini", "GRADE: C")  # the subject model judges itself
OTHER = MockModelAPI("nobody-prices-this-model", "an answer")

@step(name="c.ask")
async def ask(context: StepContext, q: str) -> float:
    request = ModelRequest(context=(UserMessage(content=(ContentText(text=q * 40),)),))
    await SUBJECT.generate(request)
    await OTHER.generate(request)
    token = call_role.set("judge")
    try:
        await JUDGE.generate(request)
    finally:
        call_role.reset(token)
    return 1.0

@workflow(name="c.wf")
async def wf(context: WorkflowContext, q: Annotated[ArrayHandle[str], "[case: str]"]
             ) -> Annotated[ArrayHandle[float], "[case: str]"]:
    return context.run_step("ask", ask, {"q": q}, map_over=["case"])

@pytest.mark.fxtr(wf)
@pytest.mark.parametrize("q", ["one", "two"])
def test_cost(q, result):
    assert result == 1.0
"""


def test_report_cost_by_role_and_unpriced_calls(pytester):
    """The report's cost has `by_role`; the subject model as judge keeps its own row and role;
    an unpriced model is `usd: null`, counted in `unpriced_calls`, and the total is the known
    sum."""
    pytester.makepyfile(test_cost=COST_EVAL)
    result = pytester.runpytest("-W", "ignore::UserWarning", "--fxtr-report", "r.json")
    result.assert_outcomes(passed=2)
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    cost = job["cost"]
    assert set(cost["by_role"]) == {"subject", "judge"}
    assert cost["by_role"]["judge"]["calls"] == 2 and cost["by_role"]["subject"]["calls"] == 4
    assert cost["by_model"]["nobody-prices-this-model"]["usd"] is None
    assert cost["by_model"]["nobody-prices-this-model"]["unpriced_calls"] == 2
    priced = cost["by_model"]["gpt-4o-mini"]
    assert priced["calls"] == 4 and priced["usd"] > 0 and priced["unpriced_calls"] == 0
    assert cost["usd"] == pytest.approx(priced["usd"]) and cost["unpriced_calls"] == 2
    assert cost["by_role"]["subject"]["unpriced_calls"] == 2
    judge, subject = cost["by_role"]["judge"]["usd"], cost["by_role"]["subject"]["usd"]
    assert judge + subject == pytest.approx(priced["usd"])
    result.stdout.fnmatch_lines(
        [
            "model*calls*in tokens*out tokens*cost*saved by cache",
            "gpt-4o-mini  *2*",
            "nobody-prices-this-model  *2*n/a*n/a",
            "gpt-4o-mini (judge)  *2*",
            "total*6*+ n/a*",
        ]
    )
    assert "subject, judge" not in result.stdout.str()


def test_report_cost_total_is_null_when_no_call_has_a_price(pytester):
    """Only unpriced calls: the report's total is `null`, never 0.0."""
    text = COST_EVAL.replace('"gpt-4o-mini"', '"nobody-prices-this-either"')
    pytester.makepyfile(test_cost=text)
    result = pytester.runpytest("-W", "ignore::UserWarning", "--fxtr-report", "r.json")
    result.assert_outcomes(passed=2)
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    assert job["cost"]["usd"] is None and job["cost"]["unpriced_calls"] == 6
    assert job["cost"]["by_role"]["judge"]["usd"] is None


SDK_EVAL = """
import httpx2
import openai
import pytest
from typing import Annotated
from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow


def refuse(request):
    raise httpx2.ConnectError("connection refused")


@step(name="s.ask")
async def ask(context: StepContext, q: str) -> float:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(refuse))
    client = openai.AsyncOpenAI(api_key="sk-test", max_retries=0, http_client=http)
    if q == "mine":
        raise ConnectionError("my own tool could not connect")
    await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": q}]
    )
    return 1.0


@workflow(name="s.wf")
async def wf(context: WorkflowContext, q: Annotated[ArrayHandle[str], "[case: str]"]
             ) -> Annotated[ArrayHandle[float], "[case: str]"]:
    return context.run_step("ask", ask, {"q": q}, map_over=["case"])


@pytest.mark.fxtr(wf)
@pytest.mark.parametrize("q", ["sdk", "mine"])
def test_sdk(q, result):
    pass
"""


def test_a_step_failed_by_its_model_call_takes_the_calls_reason(pytester):
    """The SDK's refused connection: the call is `unknown` (a transport failure, DESIGN §3)
    and so is the step it failed; the step's own ConnectionError stays `tool_error`."""
    pytest.importorskip("openai")
    pytest.importorskip("httpx2")
    pytester.makepyfile(test_sdk=SDK_EVAL)
    result = pytester.runpytest("--fxtr-report", "r.json")
    result.assert_outcomes(failed=2)
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    reasons = {i["address"].rsplit("=", 1)[1].rstrip("]"): i["reason"] for i in job["invocations"]}
    assert reasons == {"sdk": "unknown", "mine": "tool_error"}
    from fxtr.store import open_store

    store = open_store(pytester.path / ".fxtr")
    invocations = store.job_invocations(job["job_id"])
    (sdk,) = [i for a, i in invocations.items() if "case=sdk" in a]
    (call,) = sdk["model_calls"]
    assert call["reason"] == sdk["reason"] == "unknown"
    assert call["category"] == sdk["category"] == "connection"
    result.stdout.fnmatch_lines(["*failed [[]unknown[]]*APIConnectionError*"])


HERMETIC_EVAL = """
import os
import httpx2
import openai
import pytest
from typing import Annotated
from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow


def answer(request):
    return httpx2.Response(200, json={
        "id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Paris"}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    })


@step(name="h.ask")
async def ask(context: StepContext, q: str) -> float:
    import reads_at_import  # a module whose import reads a setting: not this step's read

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    client = openai.AsyncOpenAI(api_key="sk-test", max_retries=0, http_client=http)
    reply = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": q}]
    )
    if q == "knob":
        os.environ["MY_OWN_KNOB_" + "X" * 120]  # the step's own read, a long name
    return float(reply.choices[0].message.content == "Paris")


@workflow(name="h.wf")
async def wf(context: WorkflowContext, q: Annotated[ArrayHandle[str], "[case: str]"]
             ) -> Annotated[ArrayHandle[float], "[case: str]"]:
    return context.run_step("ask", ask, {"q": q}, map_over=["case"])


@pytest.mark.fxtr(wf)
@pytest.mark.parametrize("q", ["plain", "knob"])
def test_h(q, result):
    assert result == 1.0
"""


def test_hermeticity_notices_only_the_steps_own_reads(pytester, monkeypatch):
    """An openai-SDK step reads nothing of the user's (the SDK's platform probes, pydantic's
    settings and a module's import-time reads are not notices); the step's own
    `os.environ[...]` is, printed whole within 100 columns; `-v` lists every notice."""
    pytest.importorskip("openai")
    pytest.importorskip("httpx2")
    knob = "MY_OWN_KNOB_" + "X" * 120
    monkeypatch.setenv(knob, "1")
    monkeypatch.setenv("IMPORT_TIME_SETTING", "1")
    pytester.makepyfile(
        reads_at_import="import os\nSETTING = os.environ['IMPORT_TIME_SETTING']\n",
        test_h=HERMETIC_EVAL,
    )
    monkeypatch.syspath_prepend(pytester.path)
    result = pytester.runpytest("--fxtr-report", "r.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    warnings = {
        i["address"].rsplit("=", 1)[1].rstrip("]"): i["warnings"] for i in job["invocations"]
    }
    assert warnings["plain"] == []
    (only,) = warnings["knob"]
    assert knob in only
    out = result.stdout.str()
    section = out.split("fxtr summary", 1)[1]
    assert "hermeticity: 1 invocation(s) touched local state" in section
    assert max(len(line) for line in section.splitlines()[1:]) <= 100
    assert "".join(only.split()) in "".join(section.split())  # whole, wrapped, never cut
    assert "…" not in section.split("hermeticity", 1)[1].split("group", 1)[0]


def test_verbose_lists_every_hermeticity_notice(pytester):
    """Without -v the first notice; with -v every invocation's every notice, in full."""
    pytester.makepyfile(
        test_leak="""
        import os
        from typing import Annotated
        import pytest
        from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow

        @step(name="l.leak")
        async def leak(context: StepContext, q: str) -> float:
            os.environ.get("LEAK_ONE_" + q)
            os.environ.get("LEAK_TWO_" + q)
            return 1.0

        @workflow(name="l.wf")
        async def wf(context: WorkflowContext, q: Annotated[ArrayHandle[str], "[case: str]"]
                     ) -> Annotated[ArrayHandle[float], "[case: str]"]:
            return context.run_step("leak", leak, {"q": q}, map_over=["case"])

        @pytest.mark.fxtr(wf)
        @pytest.mark.parametrize("q", ["a", "b", "c"])
        def test_leak(q, result):
            pass
        """
    )
    quiet = pytester.runpytest("-p", "no:cacheprovider").stdout.str()
    assert quiet.count("LEAK_") == 1
    fresh = ("--fxtr-cache-dir", "other")  # a new store: the steps run again
    verbose = pytester.runpytest("-v", "-p", "no:cacheprovider", *fresh).stdout.str()
    section = verbose.split("fxtr summary", 1)[1]
    for q in "abc":
        assert f"'LEAK_ONE_{q}'" in section and f"'LEAK_TWO_{q}'" in section


def test_the_kit_eval_of_the_readme_has_no_hermeticity_notice(pytester):
    """The README's fifteen-line kit eval, as written: nothing the user did is a notice
    (pydantic's import-time settings read inside the first step were one)."""
    root = Path(__file__).resolve().parents[2]
    (pytester.path / "evals" / "data").mkdir(parents=True)
    shutil.copy(root / "evals/data/capitals.jsonl", pytester.path / "evals/data/capitals.jsonl")
    pytester.makepyfile(test_capitals=(root / "evals/test_capitals.py").read_text())
    result = pytester.runpytest("-p", "no:cacheprovider", "--fxtr-report", "r.json")
    result.assert_outcomes(passed=16)
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    assert [w for i in job["invocations"] for w in i["warnings"]] == []
    assert "touched local state" not in result.stdout.str()
