"""DESIGN §13: an address keeps up to N entries, one per fingerprint (issue 24, item 1)."""

from __future__ import annotations

import json
import textwrap

import pytest

from fxtr import ScalarHandle, StepContext, WorkflowContext, run, step, workflow
from fxtr.cli import main
from fxtr.store import open_store

RAN: list[str] = []


@step(name="keep.echo")
async def echo(context: StepContext, text: str) -> str:
    RAN.append(text)
    return text.upper()


@workflow(name="keep.wf")
async def wf(context: WorkflowContext, text: ScalarHandle[str]) -> ScalarHandle[str]:
    return context.run_step("echo", echo, {"text": text})


ADDRESS = "keep.wf/echo"


@pytest.fixture(autouse=True)
def _clear_ran():
    RAN.clear()


def fingerprints(store):
    current = store.get_entry(ADDRESS)
    return current.fingerprint, [h["fingerprint"] for h in store.history(ADDRESS)]


def test_a_b_a_pays_only_for_b_and_the_kept_entry_becomes_current():
    """A, then B (overwrite), then A again: the third run runs nothing and needs no review."""
    a = run(wf, {"text": "a"})
    b = run(wf, {"text": "b"}, conflict="overwrite")
    assert b.status == "succeeded" and RAN == ["a", "b"]
    again = run(wf, {"text": "a"})
    assert again.status == "succeeded" and again.output.item() == "A"
    assert again.invocations[0].from_cache and RAN == ["a", "b"]
    store = open_store(".fxtr")
    current, kept = fingerprints(store)
    assert current == a.invocations[0].fingerprint  # A became current again
    assert kept == [b.invocations[0].fingerprint]
    assert run(wf, {"text": "b"}).invocations[0].from_cache  # and B is still there
    assert RAN == ["a", "b"]


def test_a_fingerprint_the_address_never_held_is_still_reviewed():
    """Only a new fingerprint is a conflict: review by default, as before."""
    run(wf, {"text": "a"})
    run(wf, {"text": "b"}, conflict="overwrite")
    result = run(wf, {"text": "c"})
    assert result.status == "needs_review" and RAN == ["a", "b"]
    assert result.invocations[0].status == "needs_review"


def test_keep_2_evicts_the_entry_that_was_current_longest_ago():
    """Past N entries the oldest non-current goes: A, B, A (hit), C with keep 2 drops B."""
    run(wf, {"text": "a"}, cache_keep=2)
    run(wf, {"text": "b"}, conflict="overwrite", cache_keep=2)
    assert run(wf, {"text": "a"}, cache_keep=2).invocations[0].from_cache
    run(wf, {"text": "c"}, conflict="overwrite", cache_keep=2)
    store = open_store(".fxtr")
    assert len(store.history(ADDRESS)) == 1
    assert run(wf, {"text": "a"}, cache_keep=2).invocations[0].from_cache
    assert run(wf, {"text": "b"}, cache_keep=2).status == "needs_review"
    assert RAN == ["a", "b", "c"]


def test_keep_1_is_the_single_entry_cache():
    """With keep 1 nothing but the current entry stays."""
    run(wf, {"text": "a"}, cache_keep=1)
    run(wf, {"text": "b"}, conflict="overwrite", cache_keep=1)
    assert open_store(".fxtr").history(ADDRESS) == []
    assert run(wf, {"text": "a"}, cache_keep=1).status == "needs_review"


def test_a_version_bump_reruns_without_review_and_keeps_the_old_entry():
    """A changed version= is a new fingerprint that reruns on purpose; the old entry stays."""

    @step(name="keep.echo", version="2")
    async def echo2(context: StepContext, text: str) -> str:
        RAN.append("v2:" + text)
        return text

    @workflow(name="keep.wf")
    async def wf2(context: WorkflowContext, text: ScalarHandle[str]) -> ScalarHandle[str]:
        return context.run_step("echo", echo2, {"text": text})

    run(wf, {"text": "a"})
    assert run(wf2, {"text": "a"}).status == "succeeded"
    assert RAN == ["a", "v2:a"]
    assert run(wf, {"text": "a"}).invocations[0].from_cache  # version 1's entry is kept
    assert RAN == ["a", "v2:a"]


def test_bad_cache_keep_is_a_clear_error():
    with pytest.raises(ValueError, match="cache_keep must be a positive int"):
        run(wf, {"text": "a"}, cache_keep=0)


def test_cache_history_lists_newest_first_marking_the_current_one(capsys):
    """`fxtr cache history` lists current first, then the others by --index."""
    run(wf, {"text": "a"})
    run(wf, {"text": "b"}, conflict="overwrite")
    run(wf, {"text": "c"}, conflict="overwrite")
    assert run(wf, {"text": "a"}).invocations[0].from_cache
    assert main(["cache", "history", ADDRESS]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert [line.split()[0] for line in lines] == ["[current]", "[1]", "[0]"]
    store = open_store(".fxtr")
    a, b, c = (
        store.get_entry(ADDRESS).fingerprint,
        *(h["fingerprint"] for h in store.history(ADDRESS)),
    )
    assert [line.split()[1] for line in lines] == [a[:16], c[:16], b[:16]]
    assert main(["cache", "restore", ADDRESS, "--index", "0"]) == 0  # b back
    assert store.get_entry(ADDRESS).fingerprint == b
    assert run(wf, {"text": "b"}).invocations[0].from_cache


KIT_EVAL = textwrap.dedent(
    """
    import os
    from pathlib import Path

    import pytest

    from fxtr.evals import Case, Model, evaluate, includes, register_mock, user_text

    CALLS = Path(os.environ["KIT_CALLS"])

    def reply(request):
        with CALLS.open("a") as f:
            f.write("call\\n")
        return "the answer is " + user_text(request)

    register_mock("small", reply)
    MODEL = Model("mock/small", system=os.environ["KIT_SYSTEM"])
    CASES = [Case(id=f"c{i}", input=f"q{i}", target=f"q{i}") for i in range(20)]

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes()})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_kit(model, case, result):
        assert [score.value for score in result.values()] == [1.0]
    """
)


def _kit_run(pytester, monkeypatch, system, *args):
    calls = pytester.path / "calls.txt"
    calls.write_text("")
    monkeypatch.setenv("KIT_CALLS", str(calls))
    monkeypatch.setenv("KIT_SYSTEM", system)
    result = pytester.runpytest("--fxtr-report", "r.json", *args)
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    return result, job, len(calls.read_text().splitlines())


def test_kit_eval_a_b_a_makes_no_model_call_on_the_third_run(pytester, monkeypatch):
    """A 20-case kit eval, system prompt A → B → A: the third run calls nothing, no review."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_kit=KIT_EVAL)
    result, job, calls = _kit_run(pytester, monkeypatch, "Be brief.")
    result.assert_outcomes(passed=20)
    assert job["status"] == "succeeded" and calls == 20
    # a new fingerprint is still reviewed by default
    result, job, calls = _kit_run(pytester, monkeypatch, "Be thorough.")
    assert job["status"] == "needs_review" and calls == 0
    assert sum(i["status"] == "needs_review" for i in job["invocations"]) == 20
    result, job, calls = _kit_run(
        pytester, monkeypatch, "Be thorough.", "--fxtr-cache-conflict=overwrite"
    )
    result.assert_outcomes(passed=20)
    assert job["status"] == "succeeded" and calls == 20
    result, job, calls = _kit_run(pytester, monkeypatch, "Be brief.")
    result.assert_outcomes(passed=20)
    assert calls == 0
    assert job["status"] == "succeeded"
    assert all(i["from_cache"] for i in job["invocations"])


def test_kit_eval_with_cache_keep_2_forgets_the_entry_current_longest_ago(pytester, monkeypatch):
    """--fxtr-cache-keep 2: after A, B, C the address holds B and C; A is new again."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_kit=KIT_EVAL)
    keep = ("--fxtr-cache-keep", "2", "--fxtr-cache-conflict=overwrite")
    for system in ("A", "B", "C"):
        _, job, calls = _kit_run(pytester, monkeypatch, system, *keep)
        assert job["status"] == "succeeded" and calls == 20
    _, job, calls = _kit_run(pytester, monkeypatch, "B", "--fxtr-cache-keep", "2")
    assert job["status"] == "succeeded" and calls == 0
    _, job, calls = _kit_run(pytester, monkeypatch, "A", "--fxtr-cache-keep", "2")
    assert job["status"] == "needs_review" and calls == 0


def test_bad_cache_keep_option_is_a_usage_error(pytester):
    pytester.makepyfile(test_kit=KIT_EVAL)
    result = pytester.runpytest("--fxtr-cache-keep", "0")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*--fxtr-cache-keep must be a positive whole number*"])
