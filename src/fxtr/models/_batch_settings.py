"""Which models batch, and how: ``Model(..., batch=True)``, ``--fxtr-batch``, the limits."""

from __future__ import annotations

import dataclasses
from typing import Any

LIMITS = {"openai": (50_000, 200 * 1024 * 1024), "anthropic": (100_000, 256 * 1024 * 1024)}
"""Per provider: requests and bytes one batch may hold."""


@dataclasses.dataclass(frozen=True)
class BatchSettings:
    """How a model's calls are batched."""

    size: int = 1_000
    """Requests a batch holds at most (sent at once when full)."""
    delay: float = 5.0
    """Seconds a batch waits for more requests after its first."""


def provider_of(api: Any) -> str | None:
    """``openai`` or ``anthropic`` for fxtr's own clients that have batches; else ``None``."""
    from fxtr.models._providers import AnthropicMessagesAPI, OpenAIChatAPI

    if isinstance(api, AnthropicMessagesAPI):
        return "anthropic"
    if isinstance(api, OpenAIChatAPI):
        return "openai"
    return None


def check_settings(provider: str, size: int, delay: float, what: str) -> None:
    """Batch settings a provider can take, or a ``ValueError`` that says why not."""
    if provider not in LIMITS:
        msg = (
            f"{what}: batch=True needs a provider with a batch API (openai or anthropic); "
            f"{provider!r} has none. Leave batch off for this model."
        )
        raise ValueError(msg)
    most = LIMITS[provider][0]
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= most:
        msg = (
            f"{what}: batch_size must be a whole number from 1 to {most:,} ({provider}), "
            f"got {size!r}."
        )
        raise ValueError(msg)
    if not isinstance(delay, (int, float)) or isinstance(delay, bool) or not delay >= 0:
        msg = f"{what}: batch_delay must be 0 seconds or more, got {delay!r}."
        raise ValueError(msg)


# which models batch ------------------------------------------------------------------

_BATCHED: dict[tuple[str, str | None], BatchSettings] = {}
"""Per model name and base URL, the settings given with ``Model(..., batch=True)``."""

run_batching: Any = None
"""Set per run (``--fxtr-batch``): a ``ContextVar`` of the run's default ``BatchSettings``."""


def _run_default() -> Any:
    import contextvars

    global run_batching
    if run_batching is None:
        run_batching = contextvars.ContextVar("fxtr_run_batching", default=None)
    return run_batching


def configure(
    name: str,
    base_url: str | None,
    provider: str,
    *,
    batch: bool | None,
    size: int | None,
    delay: float | None,
) -> None:
    """Record ``Model(..., batch=, batch_size=, batch_delay=)``; bad settings raise at once.

    Raises:
        ValueError: the provider has no batch API, or the size or delay is out of range.
    """
    if batch is None and size is None and delay is None:
        return
    if not batch:
        if size is not None or delay is not None:
            msg = f"Model {name!r}: batch_size and batch_delay need batch=True."
            raise ValueError(msg)
        _BATCHED.pop((name, base_url), None)
        return
    settings = BatchSettings(
        size=BatchSettings.size if size is None else size,
        delay=BatchSettings.delay if delay is None else delay,
    )
    check_settings(provider, settings.size, settings.delay, f"Model {name!r}")
    _BATCHED[(name, base_url)] = dataclasses.replace(
        settings, size=size if size is not None else -1, delay=delay if delay is not None else -1
    )


def settings_for(name: str, base_url: str | None, provider: str) -> BatchSettings | None:
    """How this model's single-turn calls are batched now, or ``None`` (not batched).

    ``Model(..., batch=True)`` batches always; ``--fxtr-batch`` batches every model whose
    provider has a batch API. Sizes and delays given on the model win over the run's.
    """
    if provider not in LIMITS:
        return None
    run: BatchSettings | None = _run_default().get()
    own = _BATCHED.get((name, base_url))
    if own is None and run is None:
        return None
    base = run or BatchSettings()
    if own is None:
        return base
    return BatchSettings(
        size=own.size if own.size >= 0 else base.size,
        delay=own.delay if own.delay >= 0 else base.delay,
    )
