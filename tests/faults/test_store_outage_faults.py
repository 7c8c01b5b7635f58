"""Issue 28 item 9: PostgreSQL killed in the middle of a job.

The job's steps are running when the server is shut down (SIGQUIT to the postmaster: an
immediate shutdown, every connection cut). The job must stop at the first result it cannot
store and say so once (not hundreds of warnings and psycopg's raw error); once the server is
back, resuming the job runs what did not finish and succeeds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.faults.conftest import PYTHON, ROOT, env, job, wait_for

psycopg = pytest.importorskip("psycopg")

KEYS = [f"k{i:02d}" for i in range(20)]


def _server_facts(url: str) -> tuple[str, int, str]:
    with psycopg.connect(url, autocommit=True) as conn:
        (data,) = conn.execute("SHOW data_directory").fetchone()
        (port,) = conn.execute("SHOW port").fetchone()
        (sockets,) = conn.execute("SHOW unix_socket_directories").fetchone()
    return data, int(port), sockets


def _restart(data: str, port: int, sockets: str) -> None:
    from tests.pgserver import server_bin

    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run(
        [*prefix, f"{server_bin()}/pg_ctl", "-D", data, "-l", os.path.join(sockets, "log2"),
         "-w", "-o", f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off",
         "start"],
        check=True, capture_output=True, text=True,
    )


def test_postgres_killed_mid_job_stops_it_once_and_resume_finishes_it(tmp_path: Path) -> None:
    from tests.pgserver import server_bin, throwaway_postgres

    if server_bin() is None:
        pytest.skip("PostgreSQL's server is not installed")
    with throwaway_postgres() as url:
        data, port, sockets = _server_facts(url)
        gate = tmp_path / "gate"
        gate.mkdir()
        spec = {"store": url, "keys": KEYS, "payload": "ok", "gate": str(gate)}
        proc = subprocess.Popen(
            [PYTHON, "-m", "tests.faults.driver", json.dumps(spec)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=ROOT,
        )
        wait_for(lambda: len(list(gate.glob("started-*"))) == len(KEYS), "every step to start")
        postmaster = int(Path(data, "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGQUIT)  # immediate shutdown
        wait_for(lambda: not Path(data, "postmaster.pid").exists(), "the server to stop", 30)
        (gate / "go").touch()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode != 0, err[-3000:]
        assert err.count("stopped answering") == 1, err[-3000:]
        assert "resume the job" in err and "could not be stored" not in err, err[-3000:]
        assert len(err.splitlines()) < 40, f"{len(err.splitlines())} lines:\n{err[-3000:]}"
        _restart(data, port, sockets)
        with psycopg.connect(url, autocommit=True) as conn:
            (job_id,) = conn.execute("SELECT job_id FROM fxtr_jobs").fetchone()
        resumed = job({"store": url, "resume": job_id}, timeout=120)
        assert resumed["status"] == "succeeded" and resumed["attempt"] == 2, resumed
        assert resumed["output"] == {k: f"ok:{k}" for k in KEYS}
