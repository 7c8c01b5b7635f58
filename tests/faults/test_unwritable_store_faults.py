"""Issue 28 item 9: a full disk or a read-only store, made for real in a mount namespace.

Root in a container writes through ``chmod``, so the faults are real file systems: a tmpfs
of 1 MiB (``ENOSPC``, grown later with ``remount,size=``) and a read-only bind mount of a
store (``EROFS``), each in a private mount namespace held by a ``sleep`` (``unshare
--mount``) and entered by every command of the test (``nsenter``): nothing outside the test
sees them. Where namespaces or mounts are not allowed, the tests skip and say why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.conftest import FXTR, PYTHON, ROOT, all_bytes, env, job

KEYS = [f"k{i:02d}" for i in range(24)]


class Namespace:
    """A private mount namespace; ``run`` runs a command inside it."""

    def __init__(self) -> None:
        if not (shutil.which("unshare") and shutil.which("nsenter")):
            pytest.skip("unshare and nsenter (util-linux) are not installed")
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sleep", "600"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        ours = os.readlink("/proc/self/ns/mnt")
        deadline = time.monotonic() + 10
        while True:  # enter it only once it is another namespace than ours
            if self.holder.poll() is not None:
                err = self.holder.stderr.read() if self.holder.stderr else ""
                pytest.skip(f"cannot make a mount namespace here (unshare --mount: {err.strip()})")
            try:
                if os.readlink(f"/proc/{self.holder.pid}/ns/mnt") != ours:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.close()
                pytest.skip("unshare --mount did not make a namespace within 10 s")
            time.sleep(0.01)

    def run(self, *cmd: str, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        script = 'cd "$1" && shift && exec "$@"'
        return subprocess.run(
            ["nsenter", "-t", str(self.holder.pid), "-m", "--", "sh", "-c", script, "sh",
             str(cwd), *cmd],
            capture_output=True, text=True, env=env(), timeout=timeout,
        )

    def mount(self, *args: str) -> None:
        proc = self.run("mount", *args)
        if proc.returncode != 0:
            pytest.skip(f"mount {' '.join(args)} is not allowed here: {proc.stderr.strip()}")

    def fxtr(self, store: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(*FXTR, "--store", str(store), *args)

    def close(self) -> None:
        self.holder.kill()
        self.holder.communicate()


@pytest.fixture
def namespace() -> Iterator[Namespace]:
    ns = Namespace()
    try:
        yield ns
    finally:
        ns.close()


def _driver(ns: Namespace, spec: dict[str, object]) -> subprocess.CompletedProcess[str]:
    return ns.run(PYTHON, "-m", "tests.faults.driver", json.dumps(spec))


def _one_message(text: str, needle: str) -> str:
    """The one line of ``text`` holding ``needle``; no advice to delete the store."""
    lines = [line for line in text.splitlines() if needle in line]
    assert len(lines) == 1, text[-3000:]
    assert "delete" not in text.lower() and "afresh" not in text, text[-3000:]
    return lines[0]


VALUE_FILES = """
import json, pathlib, sqlite3, sys
folder = pathlib.Path(sys.argv[1])
with sqlite3.connect(f"file:{folder / 'cache.db'}?mode=ro", uri=True) as db:
    named = sorted(n for (n,) in db.execute("SELECT filename FROM Cache WHERE filename IS NOT NULL"))
print(json.dumps([named, sorted(str(p.relative_to(folder)) for p in folder.rglob("*.val"))]))
"""
"""The value files the store's rows name, and those on disk (diskcache keeps large values so)."""


def test_a_full_disk_mid_job_stops_it_once_and_a_resume_after_freeing_space_finishes_it(
    namespace: Namespace, tmp_path: Path
) -> None:
    """ENOSPC mid-way: one message, reading works, nothing stored is lost nor left unnamed on
    the disk, and the resume after space is freed finishes the job."""
    disk = tmp_path / "disk"
    disk.mkdir()
    namespace.mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk))
    store = disk / "store"
    spec = {"store": str(store), "keys": KEYS, "payload": "big", "concurrency": 2}
    first = _driver(namespace, spec)  # 24 results of 60 kB: the 1 MiB disk fills mid-way
    assert first.returncode != 0, first.stdout[-2000:]
    line = _one_message(first.stderr, "cannot be written")
    assert f"The store at {store} cannot be written: No space left on device (ENOSPC)" in line
    assert "free space on the disk" in line and "resume the job" in line, line
    assert "could not be stored" not in first.stderr, first.stderr[-3000:]
    assert len(first.stderr.splitlines()) < 40, first.stderr[-3000:]
    job_id = re.search(r"fxtr resume (\w+)", line).group(1)  # type: ignore[union-attr]

    listed = namespace.fxtr(store, "jobs", "--json")  # reading a full store works
    assert listed.returncode == 0, listed.stderr
    (record,) = json.loads(listed.stdout)
    assert record["job_id"] == job_id and record["status"] == "interrupted", record
    shown = namespace.fxtr(store, "show", job_id)
    assert shown.returncode == 0 and job_id in shown.stdout, shown.stderr
    stats = namespace.fxtr(store, "cache", "stats")
    stored = int(re.search(r"cache entries: (\d+)", stats.stdout).group(1))  # type: ignore[union-attr]
    assert stats.returncode == 0 and 0 < stored < len(KEYS), stats.stdout + stats.stderr

    files = namespace.run(PYTHON, "-c", VALUE_FILES, str(store / "cache"))
    named, on_disk = json.loads(files.stdout)
    assert on_disk == named, "the batch that failed left value files nothing names"

    namespace.mount("-o", "remount,size=16m", str(disk))  # space is freed
    resumed = _driver(namespace, {"store": str(store), "resume": job_id})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["status"] == "succeeded" and result["attempt"] == 2, result["status"]
    assert result["output"] == {k: f"big:{k}:" + "x" * 60_000 for k in KEYS}
    cached = [inv for inv in result["invocations"] if inv["from_cache"]]
    assert len(cached) == stored, "a result stored before the disk filled was computed again"


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, str]:
    store = tmp_path / "store"
    result = job({"store": str(store), "keys": ["k1", "k2"], "payload": "ok"})
    return store, result["job_id"]


def _read_only(ns: Namespace, folder: Path) -> None:
    ns.mount("--bind", str(folder), str(folder))
    ns.mount("-o", "remount,ro,bind", str(folder))
    probe = ns.run("touch", str(folder / "probe"))
    assert probe.returncode != 0 and "Read-only" in probe.stderr, probe


def test_a_read_only_store_is_read_by_every_command_and_a_write_names_the_reason(
    namespace: Namespace, stored: tuple[Path, str]
) -> None:
    """EROFS: jobs, show, stats and history read it (written by an older fxtr, lacking a
    table of this one's); clear and resume say why not, and nothing is written."""
    store, job_id = stored
    with sqlite3.connect(store / "cache" / "cache.db") as db:  # as a store of an older fxtr
        db.execute("DROP TABLE FxtrValues")
    before = all_bytes(store)
    _read_only(namespace, store)
    for args in (["jobs"], ["show", job_id], ["cache", "stats"],
                 ["cache", "history", "faults.batch/work[case=k1]"]):
        proc = namespace.fxtr(store, *args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and "not a readable" not in proc.stderr
    assert job_id in namespace.fxtr(store, "jobs").stdout
    for args in (["cache", "clear", "--yes"], ["resume", job_id]):
        proc = namespace.fxtr(store, *args)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr, proc.stderr
        line = _one_message(proc.stderr, "cannot be written")
        assert f"The store at {store} cannot be written: Read-only file system (EROFS)" in line
        assert f"Make {store} writable" in line, line
    assert all_bytes(store) == before


EVAL = '''
import pytest
from tests.faults.flows import batch

@pytest.mark.fxtr(batch, dims={{"case": "keys"}}, inputs={{"payload": {payload!r}, "gate": ""}})
@pytest.mark.parametrize("keys", {keys!r})
def test_work(keys, result):
    assert result.startswith("{payload}:")
'''


def _eval_project(folder: Path, payload: str, keys: list[str]) -> None:
    folder.mkdir(exist_ok=True)
    (folder / "test_work.py").write_text(EVAL.format(payload=payload, keys=keys))
    (folder / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def _pytest(ns: Namespace, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return ns.run(PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0", *args,
                  cwd=folder)


def test_pytest_on_a_read_only_store_is_one_usage_error_and_a_dry_run_reads_it(
    namespace: Namespace, tmp_path: Path
) -> None:
    """The project's .fxtr on a read-only mount: exit 4 naming it and EROFS; --fxtr-dry-run plans."""
    project = tmp_path / "project"
    _eval_project(project, "ok", ["k1", "k2"])
    first = _pytest(namespace, project)
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    _read_only(namespace, project / ".fxtr")
    proc = _pytest(namespace, project)
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
    line = _one_message(out, "cannot be written")
    assert f"{project / '.fxtr'} cannot be written: Read-only file system (EROFS)" in line, line
    dry = _pytest(namespace, project, "--fxtr-dry-run")
    assert "2 cached" in dry.stdout and "nothing was run" in dry.stdout, dry.stdout[-3000:]


def test_pytest_filling_the_disk_mid_eval_stops_it_and_resume_finishes(
    namespace: Namespace, tmp_path: Path
) -> None:
    """ENOSPC under pytest: one failure gives the reason and stops the run; --fxtr-resume finishes."""
    project = tmp_path / "project"
    _eval_project(project, "big", KEYS)
    disk = tmp_path / "disk"
    disk.mkdir()
    namespace.mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk))
    args = (f"--fxtr-cache-dir={disk / 'store'}", "--fxtr-concurrency=2")
    proc = _pytest(namespace, project, *args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]  # stopped there
    assert "INTERNALERROR" not in out and "could not be stored" not in out, out[-3000:]
    # said once: by the one item that failed (pytest's short summary repeats that item's
    # message, cut to the terminal's width, or whole where CI is set)
    failures = out.split("short test summary info")[0]
    assert failures.count("No space left on device (ENOSPC)") == 1, out[-3000:]
    assert "--fxtr-resume" in out and "1 failed" in out, out[-3000:]  # the run stopped there
    namespace.mount("-o", "remount,size=16m", str(disk))
    again = _pytest(namespace, project, *args, "--fxtr-resume", "--fxtr-report=r.json")
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    (report,) = json.loads(namespace.run("cat", str(project / "r.json")).stdout)["jobs"]
    assert report["attempt"] == 2
    assert any(inv["from_cache"] for inv in report["invocations"])


def _limited(spec: dict[str, object], limit: int) -> subprocess.CompletedProcess[str]:
    import resource

    def limit_files() -> None:  # Python ignores SIGXFSZ: a write past it fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [PYTHON, "-m", "tests.faults.driver", json.dumps(spec)], capture_output=True, text=True,
        env=env(), cwd=ROOT, timeout=120, preexec_fn=limit_files,
    )


def test_a_file_size_limit_mid_job_names_ulimit_and_a_resume_without_it_finishes(
    stored: tuple[Path, str],
) -> None:
    """EFBIG (``ulimit -f``, no privileges needed): one message naming the limit; resumable."""
    store, _ = stored
    spec = {"store": str(store), "keys": KEYS, "payload": "huge@k12", "concurrency": 2}
    first = _limited(spec, 150_000)  # k12's 300 kB result cannot be written
    assert first.returncode != 0, first.stdout[-2000:]
    line = _one_message(first.stderr, "cannot be written")
    assert "File too large (EFBIG)" in line and "ulimit -f" in line, line
    assert "could not be stored" not in first.stderr, first.stderr[-3000:]
    job_id = re.search(r"fxtr resume (\w+)", line).group(1)  # type: ignore[union-attr]
    before = job({"store": str(store), "resume": job_id})
    assert before["status"] == "succeeded" and before["attempt"] == 2, before["status"]
    assert before["output"]["k12"] == "huge:k12:" + "x" * 300_000
    assert any(inv["from_cache"] for inv in before["invocations"]), "nothing stored was kept"
