"""The seam through which model calls are recorded, so that models never import tracing.

Model APIs wrap each call in ``observe(...)``. Nothing is recorded until a recorder is
installed with ``set_observer``; ``fxtr.tracing`` installs its recorder when it is imported
(the engine imports it, so every step invocation has one).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fxtr.models._types import ModelRequest, ModelResponse


class CallSlot:
    """Where a model API puts its response for the recorder to read."""

    __slots__ = ("code", "node", "response")

    def __init__(self, node: Any = None) -> None:
        self.node = node
        """The recorder's node for this call, if it made one."""
        self.response: ModelResponse | None = None
        self.code: str | None = None
        """A digest of the code that answers (a mock's reply function), recorded with the
        call: the cache entry of the step keeps it, and serves it only while it holds."""


Observer = Callable[[str, "ModelRequest", "str | None"], AbstractAsyncContextManager[CallSlot]]
"""``observer(model_name, request, provider)``: a context manager around one call."""

_observer: Observer | None = None


def set_observer(observer: Observer | None) -> None:
    """Install the recorder of model calls (``None`` removes it)."""
    global _observer
    _observer = observer


@contextlib.asynccontextmanager
async def _unobserved() -> AsyncIterator[CallSlot]:
    yield CallSlot()


def observe(
    model_name: str, request: ModelRequest, provider: str | None = None
) -> AbstractAsyncContextManager[CallSlot]:
    """A context manager around one model call; the API sets ``slot.response``."""
    if _observer is None:
        return _unobserved()
    return _observer(model_name, request, provider)
