"""SIGKILL a 10-case, 5-turn agent eval (a real subprocess) at random points and resume it:
no finished turn is asked again and no finished tool call runs again (counted at the fake's
side, in a file both processes append to), and the scores equal an uninterrupted run's."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).parent.parent

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import fxtr
    from fxtr.agents import state_matches
    from fxtr.evals import evaluate
    from fxtr.experiment.arrays import Array
    from fxtr.store import open_store
    from tests import agent_examples as ex

    store, mode = sys.argv[1], sys.argv[2]
    inputs = {
        "model": Array.from_mapping({ex.STEPPER.name: ex.STEPPER}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in ex.STEP_CASES}, dims=["case"]),
        "scorer": state_matches(ex.counter_expected),
        "agent": ex.STEP_AGENT,
    }
    if mode == "run":
        result = fxtr.run(evaluate, inputs, store=store, concurrency=4)
    else:
        (job_id,) = [j["job_id"] for j in open_store(store).iter_jobs()]
        result = asyncio.run(fxtr.resume(job_id, store=store, concurrency=4))
    print(json.dumps({
        "status": result.status,
        "attempt": result.attempt,
        "scores": {c: s[0].value for c, s in result.output.to_dict()[ex.STEPPER.name].items()},
        "ran": [i.address for i in result.invocations if not i.from_cache],
        "cached": [i.address for i in result.invocations if i.from_cache],
    }))
    """
)


def _start(script: Path, store: Path, mode: str, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "FXTR_TEST_LOG": str(log), "FXTR_TEST_DELAY": "0.01"}
    return subprocess.Popen(
        [sys.executable, str(script), str(store), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def _finish(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


_ADDRESS = re.compile(r"case=c(\d+),sample=0\]/(turn|tool)\[(\d+)")


def _key(address: str) -> tuple[str, int, int] | None:
    """What the fake logs for the turn or tool call at an address."""
    found = _ADDRESS.search(address)
    if found is None:
        return None
    case, kind, turn = found.groups()
    return ("ask" if kind == "turn" else "tool", int(case), int(turn))


def _logged(log: Path, pid: int) -> list[tuple[str, int, int]]:
    keys = []
    for line in log.read_text().splitlines():
        who, kind, a, b = line.split(" ")
        if int(who) == pid:
            keys.append((kind, int(a), int(b)))
    return keys


def test_sigkill_at_ten_random_points_then_resume_asks_nothing_finished(tmp_path):
    """At each kill point: finished turns and tool calls are served, the rest run once."""
    script = tmp_path / "agent_job.py"
    script.write_text(SCRIPT)
    reference = _finish(_start(script, tmp_path / "ref", "run", tmp_path / "ref.log"))
    assert reference["status"] == "succeeded"
    assert reference["scores"] == {f"c{k}": 1.0 for k in range(10)}
    total = len((tmp_path / "ref.log").read_text().splitlines())
    assert total == 10 * 5 + 10 * 4  # 5 turns and 4 tool calls a trajectory
    rng = random.Random(26)
    served: list[int] = []
    for point in sorted(rng.sample(range(1, total - 5), 10)):
        store, log = tmp_path / f"s{point}", tmp_path / f"{point}.log"
        log.touch()
        killed = _start(script, store, "run", log)
        deadline = time.monotonic() + 120
        while len(log.read_text().splitlines()) < point:
            assert killed.poll() is None, "the job ended before its kill point"
            assert time.monotonic() < deadline
            time.sleep(0.002)
        os.kill(killed.pid, signal.SIGKILL)
        killed.communicate()
        resumer = _start(script, store, "resume", log)
        resumed = _finish(resumer)
        assert resumed["status"] == "succeeded" and resumed["attempt"] == 2
        assert resumed["scores"] == reference["scores"], point
        asked_again = _logged(log, resumer.pid)
        finished = {k for a in resumed["cached"] if (k := _key(a)) is not None}
        ran = [k for a in resumed["ran"] if (k := _key(a)) is not None]
        # no finished turn or tool call is asked again; what did run was asked exactly once
        assert not finished & set(asked_again), point
        assert sorted(asked_again) == sorted(ran), point
        assert len(finished) + len(ran) == total
        served.append(len(finished))
    # the kill points spread over the run: most came after some work was durable
    assert sum(n > 0 for n in served) >= 7, served
    assert max(served) > total // 2, served
