"""Provider batches (DESIGN §14) against loopback fakes of the documented endpoints."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fxtr import Array, launch, resume
from fxtr.evals import Case, Model, evaluate, includes
from fxtr.models import Usage, _batch, cost_of
from tests.loopback import BatchProvider

ROOT = Path(__file__).parent.parent


@pytest.fixture
def provider(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-batch")
    with BatchProvider() as fake:
        yield fake


def _model(fake: BatchProvider, provider: str, **options) -> Model:
    if provider == "openai":
        return Model("openai/gpt-5-mini", base_url=fake.root + "/v1", batch=True, **options)
    return Model("anthropic/claude-haiku-4-5", base_url=fake.root, batch=True, **options)


def _inputs(model: Model, words: list[str]) -> dict:
    cases = {w: Case(id=w, input=f"say {w}", target=w.upper()) for w in words}
    return {
        "model": Array.from_mapping({model.name: model}, dims=["model"]),
        "case": Array.from_mapping(cases, dims=["case"]),
        "scorer": includes(ignore_case=False),
    }


def _generates(job):
    return {
        i.address.split("case=")[1].split(",")[0]: i
        for i in job.invocations
        if i.step == "fxtr.generate"
    }


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_one_batch_carries_every_request_and_a_failed_one_fails_only_itself(provider, kind):
    model = _model(provider, kind, batch_delay=0.05)
    words = ["alpha", "beta", "gamma", "FAIL", "delta"]
    job = await launch(evaluate, _inputs(model, words), store=".fxtr", verify=False)
    assert provider.created == 1  # one batch, five requests
    assert len(provider.batches["batch_1" if kind == "openai" else "msgbatch_1"]["rows"]) == 5
    gens = _generates(job)
    assert {w for w, i in gens.items() if i.status == "succeeded"} == {
        "alpha",
        "beta",
        "gamma",
        "delta",
    }
    failed = gens["FAIL"]
    assert failed.status == "failed" and "cannot be served" in failed.error
    assert failed.category == "invalid_request"
    scores = [i for i in job.invocations if i.step == "fxtr.score" and i.status == "succeeded"]
    assert len(scores) == 4  # the answers came back, in upper case
    listed = cost_of(model.model, Usage(input_tokens=100, output_tokens=10), provider=kind)
    assert listed
    assert gens["alpha"].cost_usd == pytest.approx(listed / 2)  # the batch price


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_an_expired_batch_keeps_what_it_did_and_resume_asks_only_the_rest(provider, kind):
    model = _model(provider, kind, batch_delay=0.05)
    words = [f"w{i}" for i in range(6)]
    provider.expire_after = 4
    job = await launch(evaluate, _inputs(model, words), store=".fxtr", verify=False)
    gens = _generates(job)
    done = {w for w, i in gens.items() if i.status == "succeeded"}
    assert len(done) == 4
    assert {i.category for i in gens.values() if i.status == "failed"} == {"batch_expired"}
    provider.expire_after = None
    again = await resume(job.job_id, store=".fxtr", verify=False)
    assert again.status == "succeeded"
    assert provider.created == 2
    second = provider.batches["batch_2" if kind == "openai" else "msgbatch_2"]["rows"]
    assert len(second) == 2  # only the expired requests were asked again
    assert all(_generates(again)[w].from_cache for w in done)


def test_batch_on_a_provider_without_batches_and_sizes_over_the_limits_are_refused():
    with pytest.raises(ValueError, match="batch API"):
        Model("mock/no-batches", batch=True)
    with pytest.raises(ValueError, match="batch API"):
        Model("openai-compatible/x", base_url="http://127.0.0.1:1/v1", batch=True)
    with pytest.raises(ValueError, match="50,000"):
        Model("openai/gpt-5-mini", base_url="http://127.0.0.1:9/v1", batch=True, batch_size=50_001)
    with pytest.raises(ValueError, match="100,000"):
        Model("anthropic/x", base_url="http://127.0.0.1:9", batch=True, batch_size=100_001)
    with pytest.raises(ValueError, match="batch_delay"):
        Model("anthropic/x", base_url="http://127.0.0.1:9", batch=True, batch_delay=-1)
    with pytest.raises(ValueError, match="need batch=True"):
        Model("anthropic/x", base_url="http://127.0.0.1:9", batch_size=10)


@pytest.mark.asyncio
async def test_batches_are_split_to_the_provider_limits(monkeypatch):
    monkeypatch.setitem(_batch.LIMITS, "openai", (3, 2_000))
    loop = asyncio.get_running_loop()

    def pending(n: int, size: int) -> list:
        return [
            _batch._Pending(f"c{n}-{i}", {"x": "y" * size}, loop.create_future()) for i in range(n)
        ]

    assert [len(p) for p in _batch.split(pending(7, 10), "openai", 1_000)] == [3, 3, 1]
    assert [len(p) for p in _batch.split(pending(7, 10), "openai", 2)] == [2, 2, 2, 1]
    # by bytes: each request is about 700 bytes with its envelope, so two fit in 2,000
    assert [len(p) for p in _batch.split(pending(5, 500), "openai", 1_000)] == [2, 2, 1]
    huge = pending(1, 5_000)
    assert _batch.split(huge, "openai", 1_000) == []
    assert "over the 2,000 bytes" in str(huge[0].future.exception())


EVAL = textwrap.dedent(
    """
    import os

    import pytest

    from fxtr.evals import Case, Model, evaluate, includes

    MODEL = Model("anthropic/claude-haiku-4-5", base_url=os.environ["EVAL_URL"], batch=True,
                  batch_delay=0.05)
    CASES = [Case(id=f"w{i}", input=f"say w{i}", target=f"W{i}") for i in range(4)]

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes(ignore_case=False)})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_batched(model, case, result):
        assert result is not None
    """
)


def test_a_run_killed_while_its_batch_runs_resumes_by_polling_it(provider, tmp_path):
    (tmp_path / "test_batched.py").write_text(EVAL)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
    )
    env = dict(os.environ, EVAL_URL=provider.root, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_batched.py"]
    provider.hold = True
    log = (tmp_path / "killed.log").open("wb")
    child = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while provider.polls == 0:  # submitted, and waiting on the batch
            assert child.poll() is None, (tmp_path / "killed.log").read_text()
            assert time.monotonic() < deadline, "the run never polled its batch"
            time.sleep(0.1)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
        log.close()
    assert provider.created == 1
    provider.hold = False
    done = subprocess.run(
        [*command, "--fxtr-resume"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
    assert provider.created == 1, "the resumed run submitted the batch again"


PLUGIN_EVAL = textwrap.dedent(
    """
    import os

    import pytest

    from fxtr.evals import Case, Model, evaluate, includes

    MODEL = Model("openai/gpt-5-mini", base_url=os.environ["EVAL_URL"] + "/v1")
    CASES = [Case(id=f"w{i}", input=f"say w{i}", target=f"W{i}") for i in range(5)]

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes(ignore_case=False)})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_batched(model, case, result):
        assert result is not None
    """
)


def test_fxtr_batch_batches_every_model_with_a_batch_api(provider, pytester, monkeypatch):
    monkeypatch.setenv("EVAL_URL", provider.root)
    pytester.makepyfile(test_batched=PLUGIN_EVAL)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    args = ["-p", "no:cacheprovider", "--fxtr-batch", "--fxtr-batch-size", "2"]
    result = pytester.runpytest(*args, "--fxtr-batch-delay", "0.05")
    result.assert_outcomes(passed=5)
    assert provider.created == 3  # five requests, at most two a batch
    assert sorted(len(b["rows"]) for b in provider.batches.values()) == [1, 2, 2]
    bad = pytester.runpytest("-p", "no:cacheprovider", "--fxtr-batch-delay", "soon")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.asyncio
async def test_calls_waiting_for_a_batch_hold_no_concurrency_slot(provider):
    """2,000 cases at concurrency 32 (issue 37 item 3): two full batches of 1,000, both
    submitted before either ends (a batch delay of a minute: they went by size)."""
    model = _model(provider, "openai", batch_delay=60)
    words = [f"w{i}" for i in range(2000)]
    provider.hold = True
    run = asyncio.ensure_future(
        launch(evaluate, _inputs(model, words), store=".fxtr", verify=False, concurrency=32)
    )
    try:
        deadline = time.monotonic() + 120
        while provider.created < 2 and not run.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert provider.created == 2, (provider.created, run.done())
        sizes = sorted(len(b["rows"]) for b in provider.batches.values())
        assert sizes == [1000, 1000]
    finally:
        provider.hold = False
    job = await asyncio.wait_for(run, 120)
    assert job.status == "succeeded"
    assert provider.created == 2
    assert sum(i.status == "succeeded" for i in _generates(job).values()) == 2000
