"""Agent evals: tools, an agent loop, environments and simulated users (DESIGN §12).

```python
from fxtr.agents import Agent, UserSim, tool, tool_call, state_matches
```

``evaluate(..., agent=Agent(tools=(...)))`` runs, per (model, case, sample), a loop in which
the model answers or calls tools; every model turn and every tool call is a cached step
keyed by its content, so a rerun asks nothing and a resume re-asks no finished turn.
"""

import fxtr.evals  # noqa: F401  (the kit first: its evaluate workflow names Agent)
from fxtr.agents._loop import (
    agent_loop,
    build_env,
    finish,
    run_tool,
    score_trajectory,
    simulate_user,
    turn,
)
from fxtr.agents._scorers import TrajectoryScorer, scorer, state_matches, tool_called
from fxtr.agents._state import StoredEnv
from fxtr.agents._tool import Tool, tool
from fxtr.agents._types import STOPS, Agent, ToolOutcome, Trajectory, Turn, UserSim, tool_call
from fxtr.models import ToolCall, ToolResult, ToolSpec

__all__ = [
    "STOPS",
    "Agent",
    "StoredEnv",
    "Tool",
    "ToolCall",
    "ToolOutcome",
    "ToolResult",
    "ToolSpec",
    "Trajectory",
    "TrajectoryScorer",
    "Turn",
    "UserSim",
    "agent_loop",
    "build_env",
    "finish",
    "run_tool",
    "score_trajectory",
    "scorer",
    "simulate_user",
    "state_matches",
    "tool",
    "tool_call",
    "tool_called",
    "turn",
]
