"""The execution graph: nodes for tasks, steps and model calls, and failure reasons."""

from fxtr.tracing._classify import REASON_OF_CATEGORY, REASONS, classify, failure_category
from fxtr.tracing._client import (
    Client,
    FluxRecoveryNotInstalled,
    NodeNotResumableWarning,
    TaskScope,
)
from fxtr.tracing._graph import Node, TaskGraph

__all__ = [
    "REASONS",
    "REASON_OF_CATEGORY",
    "Client",
    "FluxRecoveryNotInstalled",
    "Node",
    "NodeNotResumableWarning",
    "TaskGraph",
    "TaskScope",
    "classify",
    "failure_category",
]
