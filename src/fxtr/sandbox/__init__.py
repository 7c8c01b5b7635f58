"""Sandboxes: agents with a shell, and the file tree as a cached value (DESIGN §17).

```python
from fxtr.sandbox import Files, Sandbox, bash, python, text_editor, sandbox_check
```

``Agent(tools=(bash, text_editor), sandbox=Sandbox(files=Files.from_dir("repo")))`` gives each
trajectory its own copy of the tree; every tool call runs a new process on the tree the
previous call left, in an isolated sandbox (bubblewrap by default), and records the layer it
made. File contents are parts of the store, kept once by digest; a rerun starts no sandbox,
and a resume at call n writes tree n once from the store.
"""

import fxtr.agents  # noqa: F401  (the agents first: the tools are @tool functions)
import fxtr.evals._evaluate as _kit
from fxtr.agents._types import SANDBOX
from fxtr.sandbox._backend import STARTED, SandboxError
from fxtr.sandbox._backend import check as check_backend
from fxtr.sandbox._files import Files
from fxtr.sandbox._scorer import (
    SandboxCheck,
    answer_code,
    grade_answer,
    grade_trajectory,
    sandbox_check,
)
from fxtr.sandbox._session import SandboxSession
from fxtr.sandbox._steps import MissingPartsError, sandbox_call, setup_tree
from fxtr.sandbox._tools import bash, python, text_editor
from fxtr.sandbox._types import (
    Built,
    CallOutcome,
    Check,
    Command,
    Layer,
    Sandbox,
    SandboxState,
)
from fxtr.sandbox._workspace import POOL

_kit.SANDBOX_GRADERS["answer"] = grade_answer
SANDBOX.update(
    Sandbox=Sandbox,
    SandboxState=SandboxState,
    check_backend=check_backend,
    setup_tree=setup_tree,
    sandbox_call=sandbox_call,
    grade_trajectory=grade_trajectory,
)

__all__ = [
    "POOL",
    "STARTED",
    "Built",
    "CallOutcome",
    "Check",
    "Command",
    "Files",
    "Layer",
    "MissingPartsError",
    "Sandbox",
    "SandboxCheck",
    "SandboxError",
    "SandboxSession",
    "SandboxState",
    "answer_code",
    "bash",
    "check_backend",
    "grade_answer",
    "grade_trajectory",
    "python",
    "sandbox_call",
    "sandbox_check",
    "setup_tree",
    "text_editor",
]
