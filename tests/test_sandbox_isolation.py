"""Isolation and limits of the bubblewrap sandbox, each by running the hostile command for real."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from fxtr.agents import ToolCall
from fxtr.sandbox import POOL, Files, Sandbox, SandboxError, bash, python
from fxtr.sandbox._backend import check, docker_problem
from fxtr.sandbox._steps import build, run_call

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)"
)


def _run(tool, box: Sandbox, tree: str | None = None, **arguments):
    async def go():
        start = tree or (await build(None, box.files, box)).tree
        return await run_call(
            None, tool, ToolCall(id="c", name=tool.name, arguments=arguments), box.settings(), start
        )

    return asyncio.run(go())


def sh(cmd: str, **settings):
    box = Sandbox(files=Files({"a.txt": "a\n"}), **settings)
    return _run(bash, box, cmd=cmd)


def test_host_files_home_project_store_and_tmp_are_invisible(tmp_path):
    """Nothing of the host but its system directories: no home, project, store, /tmp, /work."""
    secret = tmp_path / "store-secret.txt"
    secret.write_text("SECRET-IN-TMP")
    here = Path(__file__).resolve()
    out = sh(
        f"cat {secret} {here} /root/.bashrc 2>&1; ls /tmp /home; ls / ; "
        f"ls {Path.home()} {Path.cwd()} 2>&1; echo END"
    )
    text = out.result.content
    assert "SECRET-IN-TMP" not in text and "def test_host_files" not in text
    assert "No such file or directory" in text
    top = set(text.split("END")[0].split())
    assert "work" not in top and "root" not in top and "mnt" not in top
    assert {"usr", "etc", "workspace", "proc", "tmp"} <= top


def test_environment_is_cleared_and_proc_environ_holds_no_key(monkeypatch):
    """No host variable reaches the sandbox, not even through /proc/*/environ."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-be-seen-1234")
    out = sh("env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; echo END")
    text = out.result.content
    assert "sk-should-never" not in text and "OPENAI" not in text
    names = {line.split("=", 1)[0] for line in text.splitlines() if "=" in line}
    assert names <= {"PATH", "HOME", "LANG", "PWD", "SHLVL", "_", "PYTHONDONTWRITEBYTECODE"}


@pytest.mark.skipif(os.geteuid() != 0, reason="as an unprivileged user bwrap's netns has lo up")
def test_no_network_loopback_included():
    """No interface is up: connecting to the host's loopback or anywhere fails."""
    code = (
        "import socket\n"
        "for host in ('127.0.0.1', '1.1.1.1'):\n"
        "    s = socket.socket(); s.settimeout(2)\n"
        "    try:\n        s.connect((host, 80)); print('CONNECTED', host)\n"
        "    except OSError as e:\n        print('refused', host, e.errno)\n"
        "print(open('/proc/net/dev').read())\n"
    )
    out = _run(python, Sandbox(files=Files({})), code=code)
    text = out.result.content
    assert "CONNECTED" not in text
    assert "refused 127.0.0.1 101" in text  # ENETUNREACH: lo is down
    assert "eth" not in text


def test_writing_outside_the_tree_fails_and_the_tree_keeps_the_rest():
    """System directories are read-only; /tmp is the sandbox's own and not kept."""
    out = sh("echo x > /usr/evil; echo x > /etc/evil; echo y > /tmp/t; echo z > ok.txt; true")
    text = out.result.content
    assert text.count("Read-only file system") == 2
    assert not Path("/usr/evil").exists() and not Path("/etc/evil").exists()
    assert set(out.layer.added) == {"ok.txt"}


def _count_procs(marker: str) -> int:
    found = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                    found += 1
            except OSError:
                continue
    return found


def test_timeout_kills_the_whole_process_tree():
    """`sleep` past the timeout comes back as the tool's result; no process is left behind."""
    started = time.monotonic()
    out = sh("sleep 777 & (sleep 777 &) ; setsid sleep 777 & sleep 777", timeout=1)
    assert time.monotonic() - started < 10
    assert out.result.is_error
    assert "timed out after 1 s" in out.result.content
    assert out.commands[0].timed_out and out.commands[0].exit_code is None
    time.sleep(0.2)
    assert _count_procs("sleep\x00777") == 0


def test_a_storm_of_processes_stops_at_the_limit():
    """Three thousand forks asked, at most `processes` alive at once (also as root)."""
    code = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    for i in range(3000):\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            os.execvp('sleep', ['sleep', '3.1234'])\n"
        "        n += 1\n"
        "except OSError as e:\n"
        "    print('refused after', n, e.errno)\n"
        "print('started', n)\n"
    )
    out = _run(python, Sandbox(files=Files({}), processes=40, timeout=20), code=code)
    text = out.result.content
    assert "refused after" in text, text
    started = int(text.split("started")[1].split()[0])
    assert started < 40
    deadline = time.monotonic() + 2
    while _count_procs("sleep\x003.1234") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _count_procs("sleep\x003.1234") == 0


def test_output_past_the_limit_is_cut_with_a_marker():
    """The model gets output_limit bytes and a marker saying how much was cut."""
    out = sh("head -c 100000 /dev/zero | tr '\\0' x", output_limit=1000)
    text = out.result.content
    assert text.startswith("x" * 1000)
    assert "[output cut: 99000 more bytes past the limit of 1000]" in text
    assert out.commands[0].cut == 99000


def test_a_file_past_its_size_limit_fails():
    """Writing past file_mb is refused by the kernel (File size limit exceeded)."""
    out = sh("head -c 3000000 /dev/zero > big; ls -l big", file_mb=1)
    assert "File size limit exceeded" in out.result.content
    assert out.layer.added["big"]  # the file is there, cut at the limit


def test_a_tree_past_its_size_limit_is_stopped_and_undone():
    """A call growing the tree past tree_mb is an error and its changes are undone."""
    out = sh(
        "for i in $(seq 40); do head -c 1000000 /dev/zero > f$i; sleep 0.05; done; echo done",
        tree_mb=5,
        file_mb=2,
    )
    assert out.result.is_error
    assert "past its limit of 5 MiB" in out.result.content or "size limit" in out.result.content
    assert out.layer.empty and out.tree == out.layer.before


def test_memory_past_the_limit_is_the_tools_result():
    """An allocation past memory_mb fails inside the sandbox, not the run."""
    out = _run(python, Sandbox(files=Files({}), memory_mb=200), code="x = bytearray(500 * 2**20)")
    assert out.result.is_error and "MemoryError" in out.result.content


def test_a_missing_bubblewrap_names_the_fix(monkeypatch):
    """Before any model call: the error says apt-get install bubblewrap or another backend."""
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match="apt-get install bubblewrap"):
        check("bwrap")


def test_the_local_backend_runs_in_a_directory_with_a_clean_environment(monkeypatch):
    """backend='local' (named only): a temporary directory, no host variables, same tools."""
    monkeypatch.setenv("SECRET_TOKEN", "tok-123")
    out = sh("env; pwd; echo hi > b.txt", backend="local")
    assert "tok-123" not in out.result.content
    assert "b.txt" in out.layer.added
    POOL.clear()


@pytest.mark.skipif(docker_problem() is not None, reason=f"no docker daemon: {docker_problem()}")
def test_docker_backend_runs_a_command():  # pragma: no cover - needs a daemon
    """backend='docker' runs the same contract in a container."""
    out = sh("echo hi > b.txt; cat a.txt", backend="docker", image="python:3.12-slim")
    assert out.result.content.strip() == "a"
    assert "b.txt" in out.layer.added


def test_docker_without_a_daemon_names_the_fix_before_any_call():
    """No daemon: an error naming the fix, from the check made before any model call."""
    if docker_problem() is None:  # pragma: no cover - a machine with docker
        pytest.skip("docker answers here")
    with pytest.raises(SandboxError, match="backend='bwrap'"):
        check("docker")


def test_python_of_this_test_is_not_the_sandboxes():
    """The sandbox's python3 is the system's (/usr/bin), whatever runs the tests."""
    out = _run(python, Sandbox(files=Files({})), code="import sys; print(sys.executable)")
    assert out.result.content.strip() == "/usr/bin/python3"
    assert sys.executable  # the host's may be a venv's
