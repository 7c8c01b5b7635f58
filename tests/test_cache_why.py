"""DESIGN §13: every miss says why (issue 24, items 2 and 3)."""

from __future__ import annotations

import json
import textwrap

import pytest

import fxtr
from fxtr import Array, ScalarHandle, StepContext, WorkflowContext, step, workflow
from fxtr.cli import main
from fxtr.evals import (
    Case,
    Model,
    evaluate,
    includes,
    mock_judge,
    model_graded_fact,
    register_mock,
    user_text,
)
from fxtr.evals._models import _MOCKS
from fxtr.store import open_store

CALLS: list[str] = []


def _answer(request):
    CALLS.append(user_text(request))
    return "The answer is " + user_text(request)


MODEL = register_mock("why-small", _answer)
CASES = [Case(id=f"c{i}", input=f"q{i}", target=f"q{i}") for i in range(3)]


def _inputs(cases=CASES, model=MODEL, scorer=None):
    return {
        "model": Array.from_mapping({model.name: model}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": scorer or includes(),
    }


@pytest.fixture(autouse=True)
def _clear_calls():
    CALLS.clear()
    yield
    CALLS.clear()  # the reply names CALLS: its digest is taken with CALLS as at import
    register_mock("why-small", _answer)  # tests re-register it with other replies


SCORE = 'fxtr.evaluate/score[model="mock/why-small",case=c1,sample=0]'
GENERATE = 'fxtr.evaluate/generate[model="mock/why-small",case=c1,sample=0]'


def _why(capsys, address):
    assert main(["cache", "why", address]) == 0
    return capsys.readouterr().out


def test_a_target_edit_is_named_case_target_in_the_review_and_by_cache_why(capsys):
    """Editing a case's target re-grades: the review and `cache why` name case.target."""
    fxtr.run(evaluate, _inputs())
    edited = [*CASES[:1], Case(id="c1", input="q1", target="Q1!"), *CASES[2:]]
    result = fxtr.run(evaluate, _inputs(edited))
    assert result.status == "needs_review" and CALLS == ["q0", "q1", "q2"]
    review = result.invocation(SCORE)
    assert review.status == "needs_review"
    assert review.changed == ["case.target"]
    assert "input(s) case changed (case.target)" in review.error
    out = _why(capsys, SCORE)
    assert "awaits review" in out and "    case.target" in out.splitlines()
    assert result.invocation(GENERATE).from_cache  # the model is not asked again


def test_a_step_edit_is_named_code_of_the_step(capsys):
    """A step's code changed: the review, and `cache why`, say `code of STEP`."""

    @step(name="why.double")
    async def double(context: StepContext, x: int) -> int:
        return 2 * x

    @step(name="why.double")
    async def double_edited(context: StepContext, x: int) -> int:
        return x + x

    def wf_of(s):
        @workflow(name="why.wf")
        async def wf(context: WorkflowContext, x: ScalarHandle[int]) -> ScalarHandle[int]:
            return context.run_step("double", s, {"x": x})

        return wf

    fxtr.run(wf_of(double), {"x": 2})
    result = fxtr.run(wf_of(double_edited), {"x": 2})
    (inv,) = result.invocations
    assert inv.status == "needs_review" and inv.changed == ["code of why.double"]
    assert "code of why.double changed (code drift)" in inv.error
    assert "    code of why.double" in _why(capsys, "why.wf/double").splitlines()
    ran = fxtr.run(wf_of(double_edited), {"x": 2}, conflict="overwrite")
    assert ran.invocations[0].changed == ["code of why.double"]
    out = _why(capsys, "why.wf/double")
    assert "ran because what it asked for differs from the kept entry" in out
    assert "    code of why.double" in out.splitlines()


def test_a_system_prompt_change_is_named_model_system_when_it_runs(capsys):
    """Overwrite after a system-prompt change: the runs record model.system."""
    fxtr.run(evaluate, _inputs())
    briefer = Model("mock/why-small", system="Be brief.")
    result = fxtr.run(evaluate, _inputs(model=briefer), conflict="overwrite")
    gen = result.invocation(GENERATE)
    assert not gen.from_cache and gen.changed == ["model.system"]
    out = _why(capsys, GENERATE)
    assert "ran because" in out and "    model.system" in out.splitlines()
    assert "model.system" not in " ".join(result.invocation(SCORE).changed)  # score: response


def test_a_judge_template_edit_is_named_scorer_template(capsys):
    judge = mock_judge("why-judge")
    fxtr.run(evaluate, _inputs(scorer=model_graded_fact(judge)))
    edited = model_graded_fact(judge, template="{question}\n{answer}\n{criterion}\n{instructions}")
    result = fxtr.run(evaluate, _inputs(scorer=edited))
    review = result.invocation(SCORE)
    assert review.status == "needs_review" and review.changed == ["scorer.template"]


def test_cache_why_of_a_new_address_and_of_a_hit(capsys):
    fxtr.run(evaluate, _inputs())
    assert "ran because the address held no entry" in _why(capsys, GENERATE)
    fxtr.run(evaluate, _inputs())
    assert "served from the cache" in _why(capsys, GENERATE)
    assert main(["cache", "why", "fxtr.evaluate/nowhere"]) == 1
    assert "no cache entry and no job's invocation" in capsys.readouterr().err


# item 3: a mock's reply is part of the fingerprint of the calls made to it --------------


def test_editing_a_mock_reply_is_an_input_change_never_a_stale_hit(capsys):
    """Another reply function for the same mock: reviewed, named, and A → B → A is a hit."""
    fxtr.run(evaluate, _inputs())
    assert len(CALLS) == 3

    def shouted(request):
        CALLS.append("shouted")
        return "THE ANSWER IS " + user_text(request)

    register_mock("why-small", shouted)
    result = fxtr.run(evaluate, _inputs())
    assert result.status == "needs_review" and len(CALLS) == 3  # no stale hit, no call
    review = result.invocation(GENERATE)
    assert review.changed == ["code of mock/why-small"]
    assert "code of mock/why-small changed (a mock model's reply)" in review.error
    assert "    code of mock/why-small" in _why(capsys, GENERATE).splitlines()
    ran = fxtr.run(evaluate, _inputs(), conflict="overwrite")
    assert ran.status == "succeeded" and CALLS.count("shouted") == 3
    # back to the first reply, as a new process would register it (CALLS, a global list
    # the reply names, is data: part of the digest as it is at registration)
    CALLS.clear()
    register_mock("why-small", _answer)
    again = fxtr.run(evaluate, _inputs())
    assert again.status == "succeeded" and CALLS == []  # its entries were kept
    assert all(i.from_cache for i in again.invocations)


def test_the_digest_follows_the_code_a_reply_reaches():
    """Comments do not count; a global it reads, a helper it calls and a closure do."""
    from fxtr.models._mock import reply_digest

    table = {"a": "1"}

    def one(request):
        return table["a"]

    def one_commented(request):
        # a comment
        return table["a"]

    before = reply_digest(one)
    assert before == reply_digest(one_commented)
    table["a"] = "2"
    assert reply_digest(one) != before  # a value it closes over
    assert reply_digest(_answer) == reply_digest(_answer)
    assert reply_digest("x") != reply_digest("y") and reply_digest(["x"]) != reply_digest("x")
    assert _MOCKS["why-small"].code == reply_digest(_answer)


def test_a_reply_function_is_read_once_however_many_mocks_use_it(monkeypatch):
    """A step that makes its ``MockModelAPI`` per call digests the same function each time:
    its source is read and parsed once (it took ~1.5 ms a call), what it reads every time."""
    import inspect

    from fxtr.models import MockModelAPI, _mock

    reads = []
    getsource = inspect.getsource
    monkeypatch.setattr(_mock.inspect, "getsource", lambda fn: reads.append(fn) or getsource(fn))
    table = {"a": "1"}

    def reply(request):
        return table["a"]

    first = MockModelAPI("memo-a", reply).code
    assert MockModelAPI("memo-b", reply).code == first and len(reads) == 1
    table["a"] = "2"  # what it closes over is still read each time
    assert MockModelAPI("memo-c", reply).code != first and len(reads) == 1

    def other(request):
        return table["a"] + "!"

    assert MockModelAPI("memo-d", other).code != first and len(reads) == 2


MODULE = textwrap.dedent(
    """
    from fxtr.evals import user_text

    ANSWERS = {ANSWERS}

    def helper(text):
        return ANSWERS.get(text, "?")

    def reply(request):
        return helper(user_text(request))
    """
)


def test_the_digest_follows_module_globals_and_helpers(tmp_path, monkeypatch):
    import importlib
    import sys

    from fxtr.models._mock import reply_digest

    monkeypatch.syspath_prepend(str(tmp_path))
    digests = []
    for answers in ('{"q": "a"}', '{"q": "b"}'):
        (tmp_path / "why_mod.py").write_text(MODULE.replace("{ANSWERS}", answers))
        sys.modules.pop("why_mod", None)
        importlib.invalidate_caches()
        digests.append(reply_digest(importlib.import_module("why_mod").reply))
    assert digests[0] != digests[1]


# --fxtr-explain-misses --------------------------------------------------------------------

EVAL = textwrap.dedent(
    """
    import os

    import pytest

    from fxtr.evals import Case, Model, evaluate, includes, register_mock, user_text

    register_mock("small", lambda request: "the answer is " + user_text(request))
    MODEL = Model("mock/small", system=os.environ["KIT_SYSTEM"])
    CASES = [Case(id=f"c{i}", input=f"q{i}", target=os.environ["KIT_TARGET"] + str(i))
             for i in range(20)]
    MORE = [Case(id="extra", input="qx", target="qx")] if os.environ.get("KIT_MORE") else []

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes()})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES + MORE)
    def test_kit(model, case, result):
        pass
    """
)


def test_explain_misses_counts_new_addresses_and_names_what_changed(pytester, monkeypatch):
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_kit=EVAL)
    monkeypatch.setenv("KIT_SYSTEM", "A")
    monkeypatch.setenv("KIT_TARGET", "q")
    result = pytester.runpytest("--fxtr-explain-misses")
    result.stdout.fnmatch_lines(
        ["*fxtr cache misses*", "*fxtr.generate: 20 ran: 20 at a new address, 0 because*"]
    )
    monkeypatch.setenv("KIT_SYSTEM", "B")
    monkeypatch.setenv("KIT_TARGET", "Q")
    monkeypatch.setenv("KIT_MORE", "1")
    result = pytester.runpytest(
        "--fxtr-explain-misses", "--fxtr-cache-conflict=overwrite", "--fxtr-report", "r.json"
    )
    result.stdout.fnmatch_lines(
        [
            "*fxtr.generate: 21 ran: 1 at a new address, 20 because something at a known "
            "address changed",
            "*model.system: 20 (e.g. test_kit::test_kit/generate[*",
            "*fxtr.score: 21 ran: 1 at a new address, 20 because something at a known*",
            "*case.target: 20 (e.g.*",
        ]
    )
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    assert job["status"] == "succeeded"
    monkeypatch.delenv("KIT_MORE")
    result = pytester.runpytest("--fxtr-explain-misses")  # all cached: nothing ran
    result.stdout.fnmatch_lines(["*fxtr cache misses*", "job *: nothing ran"])
    store = open_store(str(pytester.path / ".fxtr"))
    assert store.get_entry('test_kit::test_kit/generate[model="mock/small",case=c0,sample=0]')


def test_a_mock_digest_is_the_same_in_every_process():
    """The digests of the example evals' mocks (lambdas, a judge) do not vary by process."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    script = (
        "import evals.test_capitals, evals.test_qa; from fxtr.models._mock import _CODE; "
        "print(sorted(_CODE.items()))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", script],
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1 and "gpt-5-mini" in outs.pop()


def test_a_tool_whose_code_changed_is_named_code_of_its_function(tmp_path):
    """An entity with the code hash of a function (an agent's tool) names that function."""
    from fxtr.agents._tool import Tool
    from fxtr.experiment._encoding import encode_text, fingerprint_text
    from fxtr.experiment._why import value_parts
    from fxtr.models import ToolSpec
    from fxtr.store import Batch

    store = open_store(tmp_path / "s")
    spec = ToolSpec(name="add", description="", parameters={"type": "object"})
    texts = [
        encode_text([Tool(path="calc:add", spec=spec, code=code, uses_env=False)])
        for code in ("c0de", "c0d3")
    ]
    store.write(Batch(values={fingerprint_text(t): t for t in texts}))
    fps = [fingerprint_text(t) for t in texts]
    assert value_parts(store, "tools", *fps) == ["code of calc:add"]
