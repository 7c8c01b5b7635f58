"""The execution graph: nodes for tasks, steps and model calls, and failure reasons.

Importing this package installs the recorder of ``fxtr.models`` calls and the capture of
calls made with the official ``openai`` / ``anthropic`` SDKs (``FXTR_CAPTURE=0`` turns the
capture off).
"""

from fxtr.models._classify import REASON_OF_CATEGORY, REASONS, classify, failure_category
from fxtr.tracing import _capture
from fxtr.tracing._client import (
    Client,
    FluxRecoveryNotInstalled,
    NodeNotResumableWarning,
    TaskScope,
)
from fxtr.tracing._graph import Node, TaskGraph

_capture.install()

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
