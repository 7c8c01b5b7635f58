"""A trajectory's sandbox in the agent loop: its starting tree, and calls that move it on."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from fxtr.agents._tool import Tool, import_path
from fxtr.agents._types import Agent
from fxtr.evals._cases import Case
from fxtr.experiment.entities import BoundID
from fxtr.models import ToolCall, ToolResult

if TYPE_CHECKING:
    from fxtr.experiment.workflows import WorkflowContext


@dataclasses.dataclass
class Box:
    """A trajectory's sandbox as the loop goes: its settings and the current tree."""

    settings: Any
    ref: BoundID[Any]
    start: str
    tree: str
    seconds: float = 0.0
    """Seconds of sandbox tool calls not yet added to the time limit's count."""

    def state(self) -> Any:
        from fxtr.sandbox import SandboxState

        return SandboxState(start=self.start, tree=self.tree, sandbox=self.settings)


async def sandbox_of(context: WorkflowContext, agent: Agent, case: Case) -> Box:
    """The trajectory's sandbox: checked (before any model call), its starting tree built.

    Raises:
        SandboxError: the backend cannot start on this machine (naming the fix).
    """
    import fxtr.sandbox as sb
    from fxtr.agents._loop import _value

    spec = agent.sandbox
    if isinstance(spec, str):
        spec = import_path(spec, "sandbox function (Agent(sandbox=...))")(case)
        if not isinstance(spec, sb.Sandbox):
            msg = f"The sandbox function {agent.sandbox!r} returned {spec!r:.60}, not a Sandbox."
            raise TypeError(msg)
    sb.check_backend(spec.backend)
    built = await _value(
        context,
        context.run_step(
            "sandbox",
            sb.setup_tree,
            {
                "files": await context.store(spec.files),
                "setup": spec.setup,
                "backend": spec.backend,
                "image": spec.image,
            },
        ),
    )
    settings = spec.settings()
    return Box(settings, await context.store(settings), built.tree, built.tree)


async def sandbox_call(
    context: WorkflowContext,
    tool: Tool,
    call: ToolCall,
    name: str,
    box: Box,
    stored: dict[str, BoundID[Tool]],
) -> ToolResult:
    """A sandbox tool call on the current tree; the tree moves on to the one it left."""
    import fxtr.sandbox as sb
    from fxtr.agents._loop import _store_tool, _value

    outcome = await _value(
        context,
        context.run_step(
            name,
            sb.sandbox_call,
            {
                "tool": stored.get(tool.name) or await _store_tool(context, tool, stored),
                "call": await context.store(call),
                "sandbox": box.ref,
                "tree": box.tree,
            },
        ),
    )
    box.tree = outcome.tree
    box.seconds += outcome.seconds
    result: ToolResult = outcome.result
    return result
