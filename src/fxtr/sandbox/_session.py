"""What a sandbox tool receives: the trajectory's sandbox, to run processes in."""

from __future__ import annotations

from fxtr.sandbox._backend import Output, run
from fxtr.sandbox._types import Command, Sandbox
from fxtr.sandbox._workspace import Workspace, tree_size


class SandboxSession:
    """A tool call's sandbox: ``await sandbox.exec(argv)`` runs a new process on the tree.

    A tool takes it as a parameter named ``sandbox`` (hidden from the model, like ``env``).
    Each ``exec`` starts a process tree in ``workdir`` with the fixed environment, the tree as
    the previous process left it; the process tree ends with it.
    """

    def __init__(self, settings: Sandbox, workspace: Workspace) -> None:
        self.settings = settings
        self.workspace = workspace
        self.commands: list[Command] = []

    async def exec(self, argv: list[str], *, stdin: bytes | None = None) -> Output:
        """Run ``argv``; its output, exit code, and whether it timed out or was stopped."""
        limit = self.settings.tree_mb * 1024 * 1024
        ws = self.workspace

        async def over_limit() -> str | None:
            size = tree_size(ws.path)
            if size > limit:
                return f"the tree grew past its size limit of {self.settings.tree_mb} MiB"
            return None

        out = await run(
            ws.path, self.settings.limits(), argv, uid=ws.uid, stdin=stdin, over_limit=over_limit
        )
        self.commands.append(
            Command(
                argv=tuple(argv),
                exit_code=out.exit_code,
                timed_out=out.timed_out,
                stopped=out.stopped,
                cut=out.dropped,
                seconds=out.seconds,
            )
        )
        return out

    def text(self, out: Output, *, exit_line: bool = True) -> str:
        """What the model reads of ``out``.

        Its output (cut to the limit, saying how much was cut), then how it ended when it did
        not end well.
        """
        body = out.stdout + (b"\n" if out.stdout and out.stderr else b"") + out.stderr
        limit = self.settings.output_limit
        cut = out.dropped + max(0, len(body) - limit)
        text = body[:limit].decode(errors="replace")
        if cut:
            text += f"\n[output cut: {cut} more bytes past the limit of {limit}]"
        if out.timed_out:
            text += f"\n[timed out after {self.settings.timeout:g} s; the process tree was killed]"
        elif out.stopped:
            text += f"\n[stopped: {out.stopped}]"
        elif exit_line and out.exit_code:
            text += f"\n[exit code {out.exit_code}]"
        return text.strip("\n") if text.strip() else "(no output)"

    @property
    def failed(self) -> bool:
        """Whether a process of this call failed, timed out or was stopped."""
        return any(c.exit_code != 0 for c in self.commands)
