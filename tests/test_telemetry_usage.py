"""A cached rerun's spans spend nothing in a backend (DESIGN §16, issue 37 item 10).

Backends such as Arize Phoenix add up ``gen_ai.usage.*`` over spans as tokens spent. A call
served from the cache carries its original tokens and cost under ``fxtr.cached_usage.*``
instead; a call made carries ``gen_ai.usage.*`` and its cost as ``llm.cost.total``.
"""

from __future__ import annotations

import json

from tests.test_telemetry import _decoded, project, receiver  # noqa: F401  (fixtures)


def _run(project, receiver, name):  # noqa: F811
    before = len(receiver.requests)
    result = project.runpytest(
        "evals/", "-p", "no:cacheprovider", "--fxtr-otel", "--fxtr-report", name
    )
    result.assert_outcomes(passed=16)
    spans = _decoded(receiver.requests[before:])
    (report,) = json.loads((project.path / name).read_text())["jobs"]
    return [s for s in spans if s["name"].startswith("chat ")], report


def test_a_cached_rerun_exports_its_calls_original_usage_apart_from_what_was_spent(
    project, receiver, monkeypatch  # noqa: F811
):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{receiver.server_port}")
    first, paid = _run(project, receiver, "first.json")
    again, cached = _run(project, receiver, "again.json")
    assert paid["cost"]["usd"] > 0 and cached["cost"]["calls"] == 0
    assert len(first) == len(again) == paid["cost"]["calls"] == 96
    for key in ("input_tokens", "output_tokens"):
        # what a backend sums over both traces is what was spent: the first run's figures
        spent = sum(s["attributes"].get(f"gen_ai.usage.{key}", 0) for s in first + again)
        assert spent == paid["cost"][key] > 0
        assert not any(f"gen_ai.usage.{key}" in s["attributes"] for s in again)
        # the originals stay readable on the cached spans
        original = sum(s["attributes"][f"fxtr.cached_usage.{key}"] for s in again)
        assert original == paid["cost"][key]
    cost = sum(s["attributes"].get("llm.cost.total", 0.0) for s in first + again)
    assert abs(cost - paid["cost"]["usd"]) < 1e-9
    assert all(s["attributes"]["llm.cost.total"] == s["attributes"]["fxtr.cost_usd"]
               for s in first if "fxtr.cost_usd" in s["attributes"])
    assert not any("llm.cost.total" in s["attributes"] or "fxtr.cost_usd" in s["attributes"]
                   for s in again)
    originals = sum(s["attributes"].get("fxtr.cached_usage.cost_usd", 0.0) for s in again)
    assert abs(originals - paid["cost"]["usd"]) < 1e-9
    assert all(s["attributes"]["fxtr.cached"] is True for s in again)
