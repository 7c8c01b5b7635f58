"""``sandbox_check``: score a tree by a command's exit code, with or without an agent."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from fxtr.evals import Case, Score, Scorer
from fxtr.sandbox._backend import check as check_backend
from fxtr.sandbox._files import normal_path
from fxtr.sandbox._session import SandboxSession
from fxtr.sandbox._steps import acquire, build, diff, record
from fxtr.sandbox._types import Built, Check, Sandbox, SandboxState
from fxtr.sandbox._workspace import POOL

if TYPE_CHECKING:
    from fxtr.experiment.steps import StepContext

TAIL = 2000
"""Characters of the command's output kept in the score's explanation."""
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_BUILT: dict[tuple[str, tuple[str, ...], str, str | None], Built] = {}
"""Starting trees this process built for ``answer_to`` checks (setup runs once a process)."""


class SandboxCheck(Scorer):
    """Runs ``command`` in a tree and scores 1.0 when it exits with ``expect_exit``.

    Made by ``sandbox_check()``. With an agent, the tree is the trajectory's final one; with
    ``answer_to``, the model's answer is written to that path of ``sandbox``'s tree first.
    """

    command: str = ""
    expect_exit: int = 0
    answer_to: str | None = None
    sandbox: Sandbox | None = None

    def __post_init__(self) -> None:
        if self.kind != "sandbox_check":
            msg = f"SandboxCheck has kind 'sandbox_check', got {self.kind!r}."
            raise ValueError(msg)

    def __fxtr_id__(self) -> str:
        """The check's command in pytest node ids."""
        return f"sandbox_check[{self.command[:40]}]"


def sandbox_check(
    command: str,
    *,
    expect_exit: int = 0,
    answer_to: str | None = None,
    sandbox: Sandbox | None = None,
) -> SandboxCheck:
    """Score a tree by running ``command`` in it: 1.0 when it exits with ``expect_exit``.

    With an agent, it runs in the trajectory's final tree (a cached score, keyed by that
    tree's digest and the command). Without one, ``answer_to`` and ``sandbox`` say where the
    model's answer (its first fenced code block, else its text) is written before the command
    runs: a HumanEval-style eval in a few lines. The explanation is the output's tail.

    Raises:
        ValueError: ``answer_to`` without ``sandbox``, or a path outside the tree.
    """
    if not isinstance(command, str) or not command.strip():
        msg = f"sandbox_check(command={command!r}) needs a shell command."
        raise ValueError(msg)
    if answer_to is not None:
        if sandbox is None:
            msg = (
                "sandbox_check(answer_to=...) needs the sandbox to write the answer into: "
                "sandbox_check(cmd, answer_to='solution.py', sandbox=Sandbox(files=...))."
            )
            raise ValueError(msg)
        answer_to = normal_path(answer_to)
    return SandboxCheck(
        kind="sandbox_check",
        command=command,
        expect_exit=int(expect_exit),
        answer_to=answer_to,
        sandbox=sandbox,
    )


def answer_code(text: str) -> str:
    """The model's answer as a file: its first fenced code block, else the whole text."""
    found = _FENCE.search(text)
    return found.group(1) if found else text


async def run_check(
    context: StepContext | None,
    scorer: SandboxCheck,
    box: Sandbox,
    tree: str,
    write: dict[str, bytes] | None = None,
) -> Check:
    """Run the check's command on ``tree`` (after writing ``write`` into it)."""
    check_backend(box.backend)
    ws = await acquire(context, tree)
    before = ws.manifest
    try:
        for path, data in (write or {}).items():
            full = ws.path / path
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_bytes(data)
            if ws.uid is not None:
                os.lchown(full, ws.uid, ws.uid)
        session = SandboxSession(box, ws)
        out = await session.exec(["bash", "--noprofile", "--norc", "-c", scorer.command])
        manifest, read = ws.capture()
    except BaseException:
        POOL.discard(ws)
        raise
    record(context, ws, read, diff(before, manifest, tree, ws.digest))
    POOL.give_back(ws)
    return Check(
        command=scorer.command,
        exit_code=out.exit_code,
        timed_out=out.timed_out,
        output=session.text(out)[-TAIL:],
    )


def _score(scorer: SandboxCheck, found: Check, answer: str | None) -> Score:
    passed = found.exit_code == scorer.expect_exit and not found.timed_out
    ended = "timed out" if found.timed_out else f"exited {found.exit_code}"
    return Score(
        value=1.0 if passed else 0.0,
        answer=answer,
        explanation=f"`{scorer.command}` {ended} (expected {scorer.expect_exit}):\n{found.output}",
    )


async def grade_trajectory(
    context: StepContext, scorer: SandboxCheck, case: Case, trajectory: Any
) -> Score:
    """Score a trajectory's final tree.

    Raises:
        ValueError: the trajectory had no sandbox (an agent without ``sandbox=``).
    """
    state = getattr(trajectory, "sandbox", None)
    if not isinstance(state, SandboxState):
        if scorer.answer_to is not None:
            return await grade_answer(context, scorer, case, trajectory.text)
        msg = (
            "sandbox_check() scores a trajectory's sandbox, and this agent has none: give "
            "Agent(sandbox=Sandbox(...)), or sandbox_check(..., answer_to=..., sandbox=...)."
        )
        raise ValueError(msg)
    found = await run_check(context, scorer, state.sandbox, state.tree)
    return _score(scorer, found, trajectory.answer)


async def grade_answer(
    context: StepContext, scorer: SandboxCheck, case: Case, completion: str
) -> Score:
    """Score an answer without an agent: written to ``answer_to``, then the command runs."""
    box = scorer.sandbox
    assert box is not None and scorer.answer_to is not None
    check_backend(box.backend)
    key = (box.files.digest, box.setup, box.backend, box.image)
    built = _BUILT.get(key)
    if built is None:
        built = _BUILT[key] = await build(context, box.files, box)
    code = answer_code(completion)
    found = await run_check(
        context, scorer, box.settings(), built.tree, {scorer.answer_to: code.encode()}
    )
    return _score(scorer, found, code)
