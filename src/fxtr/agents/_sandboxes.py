"""A trajectory's sandbox in the agent loop: its starting tree, and calls that move it on."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fxtr.agents._tool import Tool, import_path
from fxtr.agents._types import Agent, sandbox_name
from fxtr.evals._cases import Case
from fxtr.experiment.entities import BoundID
from fxtr.models import ToolCall, ToolResult

if TYPE_CHECKING:
    from fxtr.experiment.workflows import WorkflowContext


@dataclasses.dataclass
class Box:
    """A trajectory's sandbox as the loop goes: its settings and the tree as it stands."""

    settings: Any
    ref: BoundID[Any]
    start: str
    tree: str
    seconds: float = 0.0
    """Seconds of sandbox tool calls not yet added to the time limit's count."""

    def state(self) -> Any:
        return sandbox_name("SandboxState")(start=self.start, tree=self.tree, sandbox=self.settings)


async def sandbox_of(
    context: WorkflowContext, agent: Agent, case: Case, value: Callable[..., Any]
) -> Box:
    """The trajectory's sandbox: checked (before any model call), its starting tree built.

    Raises:
        SandboxError: the backend cannot start on this machine (naming the fix).
    """
    spec = agent.sandbox
    if isinstance(spec, str):
        spec = import_path(spec, "sandbox function (Agent(sandbox=...))")(case)
        if not isinstance(spec, sandbox_name("Sandbox")):
            msg = f"The sandbox function {agent.sandbox!r} returned {spec!r:.60}, not a Sandbox."
            raise TypeError(msg)
    sandbox_name("check_backend")(spec.backend)
    built = await value(
        context,
        context.run_step(
            "sandbox",
            sandbox_name("setup_tree"),
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
    value: Callable[..., Any],
    store_tool: Callable[..., Any],
) -> ToolResult:
    """A sandbox tool call on the tree as it stands; the tree moves on to the one it left."""
    outcome = await value(
        context,
        context.run_step(
            name,
            sandbox_name("sandbox_call"),
            {
                "tool": stored.get(tool.name) or await store_tool(context, tool, stored),
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
