"""Running one command in a sandbox: bubblewrap, a docker container, or a local directory.

Every command is a new process tree over the trajectory's workspace (a host directory that
only the sandbox sees, mounted at ``workdir``), with a fixed environment and limits; at its
end or its timeout the whole tree is killed. With bubblewrap, the tree runs as pid 1's
descendants in a new PID namespace: killing bwrap kills pid 1 (``--die-with-parent``), and the
kernel kills every process of a namespace whose pid 1 dies, so nothing outlives a call.

Processes are bounded by ``RLIMIT_NPROC``, which the kernel ignores for root; so when the host
runs as root, each workspace runs under its own unprivileged uid (``--uid`` inside maps to it),
where the limit holds. As root, the network namespace is made before bubblewrap starts, so it
has no interface at all, loopback included (bubblewrap's own ``--unshare-net`` brings ``lo``
up); an unprivileged host gets bubblewrap's namespace (a private loopback, the host's
unreachable).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import json
import os
import resource
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from fxtr.experiment.errors import FxtrError

ROOT = os.geteuid() == 0
SANDBOX_UID = 1000
"""The uid and gid commands see inside a bubblewrap sandbox."""
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LANG = "C.UTF-8"
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_CLONE_NEWNET = 0x40000000
POLL = 0.2
"""Seconds between two checks of the tree's size while a command runs."""


class SandboxError(FxtrError, RuntimeError):
    """A sandbox cannot start on this machine (a failure of the machine, never cached)."""


@dataclass(frozen=True)
class Limits:
    """What one command may use (from the ``Sandbox``)."""

    backend: str
    image: str | None
    network: bool
    timeout: float
    memory_mb: int
    output_limit: int
    processes: int
    file_mb: int
    workdir: str


@dataclass
class Output:
    """What a command did: its output (each stream kept up to the limit), exit and end."""

    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int | None = None
    timed_out: bool = False
    stopped: str | None = None
    """Why fxtr stopped it before its end, other than the timeout (the tree's size limit)."""
    dropped: int = 0
    """Bytes of output past the limit, not kept."""
    seconds: float = 0.0


STARTED = [0]
"""Sandboxes started by this process (what the benchmark and the tests count)."""


def check(backend: str) -> None:
    """Raise when ``backend`` cannot start here, before any model is asked (no sandbox starts).

    Raises:
        SandboxError: bubblewrap is missing, user namespaces are off, or docker is absent,
            naming the fix.
    """
    if backend == "bwrap":
        if shutil.which("bwrap") is None:
            msg = (
                "The sandbox backend 'bwrap' needs bubblewrap, which is not installed: run "
                "`apt-get install bubblewrap` (or your system's package), or use "
                "Sandbox(backend='docker') or backend='local' (no isolation)."
            )
            raise SandboxError(msg)
        problem = _userns_problem()
        if problem:
            raise SandboxError(problem)
    elif backend == "docker":
        problem = docker_problem()
        if problem:
            raise SandboxError(problem)


@functools.cache
def docker_problem() -> str | None:
    """Why docker cannot run a container here (no command, no daemon), or None."""
    if shutil.which("docker") is None:
        return (
            "The sandbox backend 'docker' needs the docker command, which is not installed: "
            "install Docker, or use Sandbox(backend='bwrap')."
        )
    try:
        answered = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        code, detail = None, str(exc)
    else:
        code, detail = answered.returncode, answered.stderr.decode(errors="replace").strip()
    if code != 0:
        return (
            f"The sandbox backend 'docker' needs a docker daemon, and none answers ({detail}): "
            "start it (`systemctl start docker`), or use Sandbox(backend='bwrap')."
        )
    return None


def _userns_problem() -> str | None:
    for path, fix in (
        (
            "/proc/sys/kernel/unprivileged_userns_clone",
            "sysctl -w kernel.unprivileged_userns_clone=1",
        ),
        ("/proc/sys/user/max_user_namespaces", "sysctl -w user.max_user_namespaces=15000"),
    ):
        try:
            value = Path(path).read_text().strip()
        except OSError:
            continue
        if value == "0":
            return (
                f"bubblewrap cannot make a sandbox: user namespaces are off ({path} is 0). "
                f"Run `{fix}`, or use Sandbox(backend='docker') or backend='local' (no isolation)."
            )
    return None


def _preexec(limits: Limits, uid: int | None) -> Callable[[], None]:
    """What the child does before exec: its network, its limits, then drop to ``uid``."""
    memory = limits.memory_mb * 1024 * 1024
    fsize = limits.file_mb * 1024 * 1024
    nproc = limits.processes
    new_net = ROOT and not limits.network and limits.backend == "bwrap"
    libc = ctypes.CDLL(None, use_errno=True) if new_net else None

    def child() -> None:
        if libc is not None and libc.unshare(_CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if uid is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)

    return child


def bwrap_argv(workspace: Path, limits: Limits, argv: list[str], status_fd: int) -> list[str]:
    """The bubblewrap command that runs ``argv`` over ``workspace``."""
    out = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    out += ["--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    if not limits.network and not ROOT:
        out.append("--unshare-net")
    for d in _SYSTEM:
        p = Path(d)
        if p.is_symlink():
            out += ["--symlink", os.readlink(p), d]
        elif p.is_dir():
            out += ["--ro-bind", d, d]
    out += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/home"]
    out += ["--bind", str(workspace), limits.workdir, "--chdir", limits.workdir]
    out += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox"]
    out += ["--clearenv", "--setenv", "PATH", PATH, "--setenv", "HOME", limits.workdir]
    out += ["--setenv", "PYTHONDONTWRITEBYTECODE", "1"]
    out += ["--setenv", "LANG", LANG, "--json-status-fd", str(status_fd), "--", *argv]
    return out


def docker_argv(workspace: Path, limits: Limits, argv: list[str], name: str) -> list[str]:
    """The ``docker run`` command that runs ``argv`` over ``workspace``."""
    if not limits.image:
        msg = "Sandbox(backend='docker') needs an image: write Sandbox(..., image='python:3.12')."
        raise SandboxError(msg)
    out = ["docker", "run", "--rm", "-i", "--name", name, "--init"]
    out += ["--network", "bridge" if limits.network else "none"]
    out += ["--memory", f"{limits.memory_mb}m", "--pids-limit", str(limits.processes)]
    out += ["--ulimit", f"fsize={limits.file_mb * 1024 * 1024}", "--cap-drop", "ALL"]
    out += ["--security-opt", "no-new-privileges", "--user", f"{os.getuid()}:{os.getgid()}"]
    out += ["-v", f"{workspace}:{limits.workdir}", "-w", limits.workdir]
    out += ["-e", f"PATH={PATH}", "-e", f"HOME={limits.workdir}", "-e", f"LANG={LANG}"]
    out += ["-e", "PYTHONDONTWRITEBYTECODE=1"]
    return [*out, limits.image, *argv]


async def _drain(stream: asyncio.StreamReader | None, keep: int, out: Output, which: str) -> None:
    if stream is None:
        return
    kept = bytearray()
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            break
        room = keep - len(kept)
        if room > 0:
            kept += chunk[:room]
        out.dropped += max(0, len(chunk) - max(room, 0))
    setattr(out, which, bytes(kept))


async def run(
    workspace: Path,
    limits: Limits,
    argv: list[str],
    *,
    uid: int | None,
    stdin: bytes | None = None,
    over_limit: Callable[[], Awaitable[str | None]] | None = None,
) -> Output:
    """Run ``argv`` in the sandbox over ``workspace``: the whole process tree ends with it.

    Raises:
        SandboxError: the sandbox itself could not start (bubblewrap refused, no daemon).
    """
    if limits.backend == "bwrap":
        return await _run_bwrap(workspace, limits, argv, uid, stdin, over_limit)
    if limits.backend == "docker":
        return await _run_docker(workspace, limits, argv, stdin, over_limit)
    return await _run_local(workspace, limits, argv, stdin, over_limit)


async def _watch(
    proc: asyncio.subprocess.Process,
    limits: Limits,
    out: Output,
    over_limit: Callable[[], Awaitable[str | None]] | None,
    kill: Callable[[], None],
) -> None:
    """Wait for the process; kill it at the timeout or when the tree passes its limit."""
    deadline = time.monotonic() + limits.timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            out.timed_out = True
            break
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), min(left, POLL))
            return
        except TimeoutError:
            pass
        if over_limit is not None:
            reason = await over_limit()
            if reason:
                out.stopped = reason
                break
    kill()
    await proc.wait()


async def _communicate(
    proc: asyncio.subprocess.Process,
    limits: Limits,
    out: Output,
    stdin: bytes | None,
    over_limit: Callable[[], Awaitable[str | None]] | None,
    kill: Callable[[], None],
) -> None:
    async def feed() -> None:
        if proc.stdin is None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if stdin:
                proc.stdin.write(stdin)
                await proc.stdin.drain()
            proc.stdin.close()

    started = time.perf_counter()
    readers = asyncio.gather(
        _drain(proc.stdout, limits.output_limit, out, "stdout"),
        _drain(proc.stderr, limits.output_limit, out, "stderr"),
    )
    try:
        await feed()
        await _watch(proc, limits, out, over_limit, kill)
        await readers
    except BaseException:
        kill()
        readers.cancel()
        with contextlib.suppress(BaseException):
            await proc.wait()
        raise
    out.exit_code = None if out.timed_out or out.stopped else proc.returncode
    out.seconds = time.perf_counter() - started


async def _run_bwrap(
    workspace: Path,
    limits: Limits,
    argv: list[str],
    uid: int | None,
    stdin: bytes | None,
    over_limit: Callable[[], Awaitable[str | None]] | None,
) -> Output:
    check("bwrap")
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *bwrap_argv(workspace, limits, argv, write_fd),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"PATH": PATH, "LANG": LANG},
            pass_fds=(write_fd,),
            preexec_fn=_preexec(limits, uid),
            cwd="/",
        )
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        msg = f"bubblewrap could not be run ({exc}): run `apt-get install bubblewrap`."
        raise SandboxError(msg) from None
    os.close(write_fd)
    STARTED[0] += 1
    out = Output()

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()  # bwrap; its pid 1 follows (--die-with-parent), then the namespace

    try:
        await _communicate(proc, limits, out, stdin, over_limit, kill)
    finally:
        status = _read_all(read_fd)
    if '"child-pid"' not in status:
        detail = out.stderr.decode(errors="replace").strip() or f"exit {proc.returncode}"
        msg = (
            f"The bubblewrap sandbox did not start: {detail}. Check that unprivileged user "
            "namespaces are allowed (`sysctl -w kernel.unprivileged_userns_clone=1`, or "
            "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` on Ubuntu), or use "
            "Sandbox(backend='docker') or backend='local' (no isolation)."
        )
        raise SandboxError(msg)
    for line in status.splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict) and "exit-code" in item and out.exit_code is not None:
                out.exit_code = int(item["exit-code"])
    return out


def _read_all(fd: int) -> str:
    chunks = []
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace")


async def _run_local(
    workspace: Path,
    limits: Limits,
    argv: list[str],
    stdin: bytes | None,
    over_limit: Callable[[], Awaitable[str | None]] | None,
) -> Output:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": PATH, "HOME": str(workspace), "LANG": LANG, "PYTHONDONTWRITEBYTECODE": "1"},
        cwd=str(workspace),
        start_new_session=True,
        preexec_fn=_preexec(limits, None),
    )
    STARTED[0] += 1
    out = Output()

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, 9)

    await _communicate(proc, limits, out, stdin, over_limit, kill)
    kill()  # what the command left in its session
    return out


async def _run_docker(
    workspace: Path,
    limits: Limits,
    argv: list[str],
    stdin: bytes | None,
    over_limit: Callable[[], Awaitable[str | None]] | None,
) -> Output:
    check("docker")
    name = f"fxtr-sandbox-{os.getpid()}-{time.monotonic_ns()}"
    proc = await asyncio.create_subprocess_exec(
        *docker_argv(workspace, limits, argv, name),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    STARTED[0] += 1
    out = Output()

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        os.spawnlp(os.P_NOWAIT, "docker", "docker", "kill", name)

    await _communicate(proc, limits, out, stdin, over_limit, kill)
    if proc.returncode == 125:  # docker's own failure: the daemon, the image
        detail = out.stderr.decode(errors="replace").strip()
        msg = (
            f"The docker sandbox did not start: {detail}. Start the docker daemon (or check "
            f"that image {limits.image!r} exists), or use Sandbox(backend='bwrap')."
        )
        raise SandboxError(msg)
    return out
