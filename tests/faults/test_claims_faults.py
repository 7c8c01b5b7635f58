"""Issue 28 item 10: a holder that died must not stall the others for a long lease.

A process claims addresses and is killed while it runs them. Killed but not reaped by its
parent (a pytest-xdist worker killed under its controller), it is a zombie: its process id
still answers signals, so a liveness test by process id alone sees it alive, and the others
waited for its whole 30-second lease. Liveness is now what a zombie cannot do: its claims'
heartbeat (and a zombie is not a running process). A frozen holder (SIGSTOP: alive, but
beating no more) loses its claims one short lease later too.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import fxtr
from fxtr.experiment._engine import LEASE
from fxtr.experiment.arrays import Array
from tests.faults.conftest import start_job, wait_for
from tests.faults.flows import batch

KEYS = [f"k{i}" for i in range(4)]


def _hold_and_stop(store: Path, tmp: Path, how: signal.Signals) -> int:
    """A job process claims every key and waits in its steps; then ``how`` stops it (never
    reaped here: a killed one stays a zombie while this process runs)."""
    gate = tmp / "gate"
    gate.mkdir()
    proc = start_job({"store": str(store), "keys": KEYS, "payload": "ok", "gate": str(gate),
                      "out": str(tmp / "held.json")})
    def started() -> bool:
        if proc.poll() is not None:  # it ended before it held anything: say why
            err = Path(str(tmp / "held.json") + ".err").read_text(errors="replace")
            raise AssertionError(f"the holder exited {proc.returncode}:\n{err[-3000:]}")
        return len(list(gate.glob("started-*"))) == len(KEYS)

    wait_for(started, "the holder's steps to start")
    os.kill(proc.pid, how)
    proc.returncode = 0  # the Popen object must not reap it when collected
    return proc.pid


def _run_after(store: Path) -> tuple[float, object]:
    keys = Array.from_mapping({k: k for k in KEYS}, dims=["case"], value_type=str)
    start = time.monotonic()
    result = fxtr.run(batch, {"keys": keys, "payload": "ok", "gate": ""}, store=str(store))
    return time.monotonic() - start, result


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return stat[stat.rfind(b")") + 2 :][:1].decode()


def test_claims_of_a_killed_unreaped_holder_are_taken_at_once(tmp_path: Path) -> None:
    """Twenty times: the holder is SIGKILLed and left a zombie; the next job takes its
    claims and finishes in a few seconds (it waited 30 s for the lease before)."""
    zombies = []
    try:
        for i in range(20):
            store, tmp = tmp_path / f"store{i}", tmp_path / f"t{i}"
            tmp.mkdir()
            pid = _hold_and_stop(store, tmp, signal.SIGKILL)
            zombies.append(pid)
            wait_for(lambda pid=pid: _state(pid) == "Z", "the holder to be a zombie", 10)
            took, result = _run_after(store)
            assert result.status == "succeeded", result.invocations  # type: ignore[attr-defined]
            assert took < 10, f"run {i}: waited {took:.1f}s for a zombie's claims"
    finally:
        for pid in zombies:
            os.waitpid(pid, 0)


def test_claims_of_a_frozen_holder_expire_one_short_lease_later(tmp_path: Path) -> None:
    """The holder is stopped (SIGSTOP): alive, but its heartbeat stops; its claims are taken
    after about one lease (seconds), not the 30 s lease of before."""
    for i in range(2):
        store, tmp = tmp_path / f"store{i}", tmp_path / f"t{i}"
        tmp.mkdir()
        pid = _hold_and_stop(store, tmp, signal.SIGSTOP)
        try:
            took, result = _run_after(store)
        finally:
            os.kill(pid, signal.SIGKILL)
            os.kill(pid, signal.SIGCONT)
            os.waitpid(pid, 0)
        assert result.status == "succeeded", result.invocations  # type: ignore[attr-defined]
        assert took < LEASE + 10 < 30, f"waited {took:.1f}s for a frozen holder's claims"
