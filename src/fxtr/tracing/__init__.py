"""The execution graph: nodes for tasks, steps and model calls, and failure reasons.

Importing this package installs the recorder of ``fxtr.models`` calls and the capture of
calls made with the official ``openai`` / ``anthropic`` SDKs (``FXTR_CAPTURE=0`` turns the
capture off).

For integrations that make nodes of their own (``fxtr.integrations.langgraph``):
``current_frame`` holds the (graph, node id) new nodes go under, and ``NodeStatus`` names the
statuses a node can end in.
"""

from fxtr.models._classify import REASON_OF_CATEGORY, REASONS, classify, failure_category
from fxtr.tracing import _capture
from fxtr.tracing._client import (
    Client,
    FluxRecoveryNotInstalled,
    NodeNotResumableWarning,
    TaskScope,
)
from fxtr.tracing._graph import Node, NodeStatus, TaskGraph
from fxtr.tracing._recorder import current_frame

_capture.install()

__all__ = [
    "REASONS",
    "REASON_OF_CATEGORY",
    "Client",
    "FluxRecoveryNotInstalled",
    "Node",
    "NodeNotResumableWarning",
    "NodeStatus",
    "TaskGraph",
    "TaskScope",
    "classify",
    "current_frame",
    "failure_category",
]
