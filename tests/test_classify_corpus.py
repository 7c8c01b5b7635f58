"""The classifier on a corpus of real provider error bodies (tests/data/errors/corpus.jsonl).

Each entry is a body a provider or gateway really sent, with where it was found. Every entry
goes through ``category_from_http(status, body)`` and through ``classify()`` of the two error
shapes callers meet: an ``httpx.HTTPStatusError`` built from a real ``httpx.Response``, and an
SDK-style error (``status_code`` and ``body``, like ``openai.APIStatusError``, whose ``body``
is the inner ``error`` object, and ``anthropic.APIStatusError``, whose ``body`` is the whole
document).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest

from fxtr.models._classify import REASON_OF_CATEGORY, category_from_http
from fxtr.tracing import REASONS, classify, failure_category

CORPUS = Path(__file__).parent / "data" / "errors" / "corpus.jsonl"
ENTRIES: list[dict[str, Any]] = [
    json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line
]


class SDKStatusError(Exception):
    """Shaped like openai.APIStatusError / anthropic.APIStatusError."""

    def __init__(self, status_code: int, body: Any) -> None:
        super().__init__(f"Error code: {status_code} - {body}")
        self.status_code = status_code
        self.body = body


def _content(body: Any) -> str:
    return body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)


def _httpx_error(entry: dict[str, Any]) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "https://api.example.com/v1/chat/completions")
    response = httpx.Response(
        entry["status"],
        content=_content(entry["body"]).encode("utf-8"),
        headers={"content-type": "application/json", **(entry.get("headers") or {})},
        request=request,
    )
    return httpx.HTTPStatusError(f"HTTP {entry['status']}", request=request, response=response)


def _openai_style_body(body: Any) -> Any:
    """What openai's client keeps in ``APIStatusError.body``: the ``error`` object if any."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body["error"]
    return body


def _ident(entry: dict[str, Any]) -> str:
    return f"{ENTRIES.index(entry)}-{entry['provider']}-{entry['status']}"


def test_corpus_is_large_sourced_and_wide() -> None:
    """At least 120 real bodies from at least 15 providers, each with its source and labels."""
    assert len(ENTRIES) >= 120
    providers = {e["provider"] for e in ENTRIES}
    assert len(providers) >= 15, sorted(providers)
    for entry in ENTRIES:
        assert entry["source"].startswith("https://"), entry
        # held-out rounds (tests/data/errors/HELDOUT.md) are numbered from 2
        assert isinstance(entry.get("round", 1), int) and entry.get("round", 1) >= 1, entry
        assert entry["expected_reason"] in REASONS, entry
        assert (
            REASON_OF_CATEGORY.get(entry["expected_category"], "unknown")
            == (entry["expected_reason"])
        ), entry
    reasons = Counter(e["expected_reason"] for e in ENTRIES)
    assert {"budget", "context_overflow", "refusal", "unknown"} <= set(reasons)


def test_corpus_has_no_duplicate_bodies() -> None:
    """Each entry is a different body (the same body twice would inflate the accuracy)."""
    seen = Counter((e["status"], _content(e["body"])) for e in ENTRIES)
    assert [k for k, n in seen.items() if n > 1] == []


@pytest.mark.parametrize("entry", ENTRIES, ids=_ident)
def test_category_from_http(entry: dict[str, Any]) -> None:
    """The status and the body as sent give the expected category, hence the reason."""
    category = category_from_http(entry["status"], entry["body"], entry.get("headers"))
    assert (category, REASON_OF_CATEGORY.get(category, "unknown")) == (
        entry["expected_category"],
        entry["expected_reason"],
    )


@pytest.mark.parametrize("entry", ENTRIES, ids=_ident)
def test_classify_httpx_status_error(entry: dict[str, Any]) -> None:
    """An httpx.HTTPStatusError is read from its response: status, text body, headers."""
    error = _httpx_error(entry)
    assert failure_category(error) == entry["expected_category"]
    assert classify(error) == entry["expected_reason"]


@pytest.mark.parametrize("entry", ENTRIES, ids=_ident)
def test_classify_sdk_errors(entry: dict[str, Any]) -> None:
    """SDK-style errors, with the whole body (anthropic) or its error object (openai)."""
    for body in (entry["body"], _openai_style_body(entry["body"])):
        error = SDKStatusError(entry["status"], body)
        assert (failure_category(error), classify(error)) == (
            entry["expected_category"],
            entry["expected_reason"],
        ), body


def test_accuracy_per_provider(capsys: pytest.CaptureFixture[str]) -> None:
    """Per-provider accuracy over the three paths, printed; the corpus asks for 100%."""
    right: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    misses = []
    for entry in ENTRIES:
        got = {
            "category_from_http": REASON_OF_CATEGORY.get(
                category_from_http(entry["status"], entry["body"], entry.get("headers")),
                "unknown",
            ),
            "httpx": classify(_httpx_error(entry)),
            "sdk": classify(SDKStatusError(entry["status"], entry["body"])),
        }
        for path, reason in got.items():
            total[entry["provider"]] += 1
            if reason == entry["expected_reason"]:
                right[entry["provider"]] += 1
            else:
                misses.append((path, entry["provider"], entry["status"], reason, entry["source"]))
    with capsys.disabled():
        print(f"\nclassifier accuracy on {len(ENTRIES)} real bodies, 3 paths each:")
        for provider in sorted(total, key=lambda p: (-total[p], p)):
            share = right[provider] / total[provider]
            print(f"  {provider:14} {right[provider]:3}/{total[provider]:<3} {share:7.1%}")
        overall = sum(right.values()) / sum(total.values())
        print(f"  {'all':14} {sum(right.values()):3}/{sum(total.values()):<3} {overall:7.1%}")
    assert misses == []
