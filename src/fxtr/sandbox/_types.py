"""The sandbox's values: ``Sandbox``, the layer a call made, and what a call returns."""

from __future__ import annotations

import dataclasses
from typing import Any

from fxtr.experiment.entities import Entity
from fxtr.models import ToolResult
from fxtr.sandbox._backend import Limits
from fxtr.sandbox._files import Files

BACKENDS = ("bwrap", "docker", "local")


class Sandbox(Entity):
    """Where an agent's commands run: a file tree, how it is built, the backend and limits.

    ``Sandbox(files=Files.from_dir("repo"), setup=("python3 -m venv .venv",))`` gives each
    trajectory its own copy of the tree built by ``setup``; every tool call runs a new process
    on the tree as the previous call left it. Only files persist between calls.
    """

    files: Files = Files(manifest={})
    """The starting files (before ``setup``)."""
    setup: tuple[str, ...] = ()
    """Shell commands run once over ``files``, with the network, to build the starting tree
    (a cached step keyed by the files' digest, the commands and the backend)."""
    backend: str = "bwrap"
    """``bwrap`` (bubblewrap, isolated), ``docker`` (a container of ``image``) or ``local`` (a
    temporary directory, no isolation: only when named, and the summary says so)."""
    image: str | None = None
    """The docker image (``docker`` only)."""
    network: bool = False
    """Whether commands reach the network (setup always does)."""
    timeout: float = 60.0
    """Seconds a command may run; then its whole process tree is killed."""
    memory_mb: int = 2048
    """Address space of each process, in MiB."""
    output_limit: int = 16384
    """Bytes of output returned to the model; the rest is cut with a marker saying how much."""
    workdir: str = "/workspace"
    """Where the tree is, and where commands start."""
    processes: int = 256
    """Processes (and threads) a command may run at once."""
    file_mb: int = 256
    """Size of one file, in MiB (a larger write fails with 'File size limit exceeded')."""
    tree_mb: int = 1024
    """Size of the whole tree, in MiB: a call that grows it past this is stopped and undone."""

    def __post_init__(self) -> None:
        problems = []
        if self.backend not in BACKENDS:
            problems.append(f"backend={self.backend!r} (use one of {', '.join(BACKENDS)})")
        if self.backend == "docker" and not self.image:
            problems.append("backend='docker' needs image=... (e.g. 'python:3.12-slim')")
        if not isinstance(self.files, Files):
            problems.append(f"files={self.files!r} (use Files(...) or Files.from_dir(path))")
        if isinstance(self.setup, str):
            object.__setattr__(self, "setup", (self.setup,))
        for name in ("timeout", "memory_mb", "output_limit", "processes", "file_mb", "tree_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                problems.append(f"{name}={value!r} (a number > 0)")
        if not self.workdir.startswith("/") or self.workdir.rstrip("/") in ("", "/usr", "/etc"):
            problems.append(f"workdir={self.workdir!r} (an absolute path of its own)")
        if problems:
            msg = "Sandbox has invalid settings: " + "; ".join(problems) + "."
            raise ValueError(msg)
        object.__setattr__(self, "setup", tuple(self.setup))
        object.__setattr__(self, "timeout", float(self.timeout))

    def settings(self) -> Sandbox:
        """This sandbox without its files and setup: what a call on a built tree depends on."""
        return dataclasses.replace(self, files=Files(manifest={}), setup=())

    def limits(self, *, network: bool | None = None, timeout: float | None = None) -> Limits:
        """The limits of one command."""
        return Limits(
            backend=self.backend,
            image=self.image,
            network=self.network if network is None else network,
            timeout=self.timeout if timeout is None else timeout,
            memory_mb=self.memory_mb,
            output_limit=self.output_limit,
            processes=self.processes,
            file_mb=self.file_mb,
            workdir=self.workdir,
        )


class Layer(Entity):
    """What one call did to the tree: files added, changed (content or mode) and deleted.

    ``added`` and ``changed`` map each path to ``"MODE:DIGEST"``; the bytes are parts of the
    store. The tree after the call is the tree before plus this layer.
    """

    before: str
    """Digest of the tree the call ran on."""
    after: str
    """Digest of the tree it left."""
    added: dict[str, str] = dataclasses.field(default_factory=dict)
    changed: dict[str, str] = dataclasses.field(default_factory=dict)
    deleted: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether the call changed nothing."""
        return not (self.added or self.changed or self.deleted)


class Command(Entity):
    """One process a call ran: what, and how it ended."""

    argv: tuple[str, ...]
    exit_code: int | None = None
    """``None`` when it was killed (timeout, tree limit)."""
    timed_out: bool = False
    stopped: str | None = None
    """Why fxtr stopped it before its end, other than the timeout."""
    cut: int = 0
    """Bytes of output past ``output_limit``, not returned."""
    seconds: float = 0.0


class CallOutcome(Entity):
    """A sandbox tool call's result: what the model reads, the tree after, and the layer."""

    result: ToolResult
    tree: str
    """Digest of the tree the call left (the next call's input)."""
    layer: Layer
    commands: tuple[Command, ...] = ()
    seconds: float = 0.0

    @property
    def timed_out(self) -> bool:
        """Whether a command of the call ran out of time."""
        return any(c.timed_out for c in self.commands)


class Built(Entity):
    """The starting tree ``setup`` built: its digest and size, and the setup's output."""

    tree: str
    files: int = 0
    bytes: int = 0
    output: str = ""


class SandboxState(Entity):
    """A trajectory's sandbox, as its scorers and the viewer see it."""

    start: str
    """Digest of the starting tree (after ``setup``)."""
    tree: str
    """Digest of the final tree."""
    sandbox: Sandbox
    """The settings the calls ran with (without the files: the trees hold them)."""


class Check(Entity):
    """What ``sandbox_check`` saw: the command's exit and its output's tail."""

    command: str
    exit_code: int | None
    timed_out: bool = False
    output: str = ""


def as_sandbox(value: Any) -> Sandbox:
    """``value`` if it is a ``Sandbox``, else a ``TypeError`` naming the fix."""
    if not isinstance(value, Sandbox):
        msg = f"Expected a fxtr.sandbox.Sandbox, got {type(value).__name__} {value!r:.60}."
        raise TypeError(msg)
    return value
