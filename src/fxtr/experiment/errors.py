"""Errors raised by fxtr's experiment engine.

Hierarchy::

    FxtrError                      root of every fxtr error
    ├── SignatureError (TypeError) a bad annotation, or inputs that do not fit a signature
    ├── DeterminismError           a workflow body scheduled something else on replay
    ├── CacheConflictError         a cached result was computed from other inputs or code
    └── UpstreamFailedError        a handle observed in a workflow body has no value
"""

from __future__ import annotations

__all__ = [
    "CacheConflictError",
    "DeterminismError",
    "FxtrError",
    "SignatureError",
    "UpstreamFailedError",
]


class FxtrError(Exception):
    """Root of every error fxtr raises on purpose."""


class SignatureError(FxtrError, TypeError):
    """An annotation is not one fxtr understands, or scheduled inputs do not fit it."""


class DeterminismError(FxtrError):
    """A replayed workflow body scheduled a different operation than the record holds."""


class CacheConflictError(FxtrError):
    """The step cache holds a result for an address computed from other inputs or code."""


class UpstreamFailedError(FxtrError):
    """An observed handle has no value because the step behind it failed or was skipped."""
