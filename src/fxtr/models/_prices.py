"""Prices from pydantic's maintained ``genai-prices`` database; ``set_price`` overrides win.

An unknown model costs ``None`` (never a guess) and is warned about once.

``genai_prices.calc_price`` takes ~0.2 ms a call, too slow for the per-call budget of
capture, so each (model, provider, price tier) is asked a few times and the answers kept as
the coefficients of the linear price they describe: within one tier (tiers are chosen by the
total input tokens), a call's price is linear in its uncached input, cache reads, cache writes
and output tokens. The coefficients are genai-prices' own figures; ``tests/test_models.py``
compares the result with ``calc_price`` on arbitrary usages, tiered models included.
"""

from __future__ import annotations

import bisect
import logging
import re
import threading
import time
import warnings
from typing import Any

from fxtr.models._types import Usage

log = logging.getLogger("fxtr.models")


class UnknownPriceWarning(UserWarning):
    """A model has no price (neither ``set_price`` nor genai-prices); its cost is ``None``."""


PRICES: dict[str, dict[str, float]] = {}
"""Overrides set with ``set_price``: USD per million tokens by model (``input``, ``output``,
``cached_input``, ``cache_write``). They win over the database."""
_warned: set[str] = set()
_DATED = re.compile(r"^-(\d{4}-?\d{2}-?\d{2}|\d{8}|latest)$")
_DEFAULT_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
_WINDOW = 900.0
"""Seconds a database answer is reused (prices that change by date or hour stay right)."""
_lock = threading.Lock()
_models: dict[tuple[Any, ...], _Price | None] = {}


def set_price(
    model: str,
    *,
    input: float,
    output: float,
    cached_input: float | None = None,
    cache_write: float | None = None,
) -> None:
    """Add or override a model's price (USD per million tokens), for every provider.

    Cache reads cost ``cached_input`` (default: ``input``), cache writes ``cache_write``
    (default: ``input``).
    """
    PRICES[model] = {
        "input": float(input),
        "output": float(output),
        "cached_input": float(input if cached_input is None else cached_input),
        "cache_write": float(input if cache_write is None else cache_write),
    }


def price_of(model: str) -> dict[str, float] | None:
    """The override of a model; dated snapshots (``gpt-4o-2024-08-06``) use their family's."""
    if model in PRICES:
        return PRICES[model]
    best = None
    for name in PRICES:
        if (
            model.startswith(name)
            and _DATED.match(model[len(name) :])
            and (best is None or len(name) > len(best))
        ):
            best = name
    return PRICES[best] if best else None


def has_price(model: str, *, provider: str | None = None, api_url: str | None = None) -> bool:
    """Whether ``cost_of`` would price this model (an override or a database entry)."""
    return price_of(model) is not None or _database(model, provider, api_url) is not None


def cost_of(
    model: str,
    usage: Usage,
    *,
    provider: str | None = None,
    api_url: str | None = None,
    cache_write_tokens: int = 0,
    warn: bool = True,
) -> float | None:
    """Dollars a call cost, or ``None`` for a model without a price (warned once).

    Args:
        model: the model the request was sent to (dated ids resolve to their family).
        usage: tokens; ``input_tokens`` counts every input token, cached ones included, and
            ``cached_input_tokens`` the cache reads among them.
        provider: ``"openai"``, ``"anthropic"``, ...; ``None`` infers it from the model.
        api_url: the server's base URL; a known provider's URL (OpenRouter, Groq, Azure, ...)
            selects that provider's prices, any other falls back to ``provider``.
        cache_write_tokens: input tokens written to the provider's prompt cache (Anthropic's
            ``cache_creation_input_tokens``), part of ``input_tokens``.
        warn: warn (once per model) when the model has no price.
    """
    return cost_of_tokens(
        model,
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_input_tokens,
        cache_write_tokens,
        provider=provider,
        api_url=api_url,
        warn=warn,
    )


def cost_of_tokens(
    model: str,
    input_tokens: int,
    output_tokens: int,
    cached_input_tokens: int = 0,
    cache_write_tokens: int = 0,
    *,
    provider: str | None = None,
    api_url: str | None = None,
    warn: bool = True,
) -> float | None:
    """``cost_of`` from plain token counts (no ``Usage`` to build: the capture's hot path)."""
    total_in = max(0, input_tokens)
    cached = min(max(0, cached_input_tokens), total_in)
    writes = min(max(0, cache_write_tokens), total_in - cached)
    out = max(0, output_tokens)
    override = price_of(model)
    if override is not None:
        return (
            (total_in - cached - writes) * override["input"]
            + cached * override.get("cached_input", override["input"])
            + writes * override.get("cache_write", override["input"])
            + out * override["output"]
        ) / 1_000_000
    price = _database(model, provider, api_url)
    if price is None:
        if warn and model not in _warned:
            _warned.add(model)
            warnings.warn(
                f"No price for model {model!r} (provider {provider or 'unknown'}) in genai-prices;"
                f" its cost is reported as None. Add one with "
                f"fxtr.models.set_price({model!r}, input=..., output=...).",
                UnknownPriceWarning,
                stacklevel=4,
            )
        return None
    return price.cost(total_in, cached, writes, out)


class _Price:
    """genai-prices' price of one model at one provider, as linear coefficients per tier."""

    __slots__ = ("_model", "_ref", "_starts", "_tiers")

    def __init__(self, model: str, ref: dict[str, Any], starts: tuple[int, ...]) -> None:
        self._model = model
        self._ref = ref
        self._starts = starts
        self._tiers: dict[int, tuple[float, float, float, float]] = {}

    def _calc(self, **usage: int) -> float:
        import genai_prices

        result = genai_prices.calc_price(genai_prices.Usage(**usage), self._model, **self._ref)
        return float(result.total_price)

    def cost(self, total_in: int, cached: int, writes: int, out: int) -> float:
        if total_in == 0:
            return self._calc(output_tokens=out) if out else 0.0
        tier = bisect.bisect_left(self._starts, total_in)  # tiers whose start is passed
        k = self._tiers.get(tier)
        if k is None:
            t = total_in
            base = self._calc(input_tokens=t)
            k = (
                base / t,
                (self._calc(input_tokens=t, cache_read_tokens=t) - base) / t,
                (self._calc(input_tokens=t, cache_write_tokens=t) - base) / t,
                (self._calc(input_tokens=t, output_tokens=t) - base) / t,
            )
            self._tiers[tier] = k
        return k[0] * total_in + k[1] * cached + k[2] * writes + k[3] * out


def _database(model: str, provider: str | None, api_url: str | None) -> _Price | None:
    window = int(time.time() // _WINDOW)
    key = (model, provider, api_url, window)
    try:
        return _models[key]
    except KeyError:
        pass
    found = _lookup(model, provider, api_url)
    with _lock:
        if len(_models) > 4096:
            _models.clear()
        _models[key] = found
    return found


def _lookup(model: str, provider: str | None, api_url: str | None) -> _Price | None:
    import genai_prices

    refs: list[dict[str, Any]] = []
    if api_url and api_url.rstrip("/") != _DEFAULT_URLS.get(provider or "", ""):
        refs.append({"provider_api_url": api_url})
    refs.append({"provider_id": provider} if provider else {})
    for ref in refs:
        try:
            result = genai_prices.calc_price(genai_prices.Usage(input_tokens=1), model, **ref)
        except LookupError:
            continue
        starts = sorted(
            {
                tier.start
                for value in vars(result.model_price).values()
                for tier in getattr(value, "tiers", ())
            }
        )
        return _Price(model, ref, tuple(starts))
    return None
