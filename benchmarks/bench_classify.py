"""Classifier speed: a 10,000-body pass over the real corpus, against baselines in the same run.

Run: .venv/bin/python benchmarks/bench_classify.py   (prints ratios and µs per call)
Baselines: the classifier of commit 3baf75d (read with ``git show``), and ``json.loads`` of
the same bodies (the cost of merely parsing what a provider sent).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fxtr.models._classify import category_from_http, classify

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "errors" / "corpus.jsonl"
N = 10_000


class SDKStatusError(Exception):
    def __init__(self, status_code: int, body: object) -> None:
        super().__init__(f"Error code: {status_code}")
        self.status_code = status_code
        self.body = body


def _old_module():
    source = subprocess.run(
        ["git", "show", "3baf75d:src/fxtr/tracing/_classify.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_classify.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_classify", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _best(fns: dict, rounds: int = 15) -> dict:
    """Best time of each function over interleaved rounds (the machine is shared)."""
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main() -> None:
    entries = [json.loads(line) for line in CORPUS.read_text().splitlines() if line]
    errors = [SDKStatusError(e["status"], e["body"]) for e in entries]
    errors = (errors * (N // len(errors) + 1))[:N]
    texts = [e["body"] if isinstance(e["body"], str) else json.dumps(e["body"]) for e in entries]
    texts = (texts * (N // len(texts) + 1))[:N]
    old = _old_module()

    t = _best(
        {
            "new": lambda: [classify(e) for e in errors],
            "old": lambda: [old.classify(e) for e in errors],
            "http": lambda: [category_from_http(e.status_code, e.body) for e in errors],
            "text": lambda: [category_from_http(400, t) for t in texts],
            "parse": lambda: [json.loads(t) if t[:1] in "{[" else t for t in texts],
        }
    )
    new_t, old_t, http_t, text_t, parse_t = (t[k] for k in ("new", "old", "http", "text", "parse"))

    print(f"{N} bodies from {len(entries)} real provider errors (best of 15 interleaved rounds)")
    print(f"  classify(SDK error), new rules : {new_t / N * 1e6:6.1f} µs/call")
    ratio = new_t / old_t
    old_us = old_t / N * 1e6
    print(f"  classify(SDK error), 3baf75d   : {old_us:6.1f} µs/call  (new/old = {ratio:.2f})")
    print(f"  category_from_http(parsed body): {http_t / N * 1e6:6.1f} µs/call")
    print(f"  category_from_http(text body)  : {text_t / N * 1e6:6.1f} µs/call")
    parse = text_t / parse_t
    parse_us = parse_t / N * 1e6
    print(f"  json.loads of the same text    : {parse_us:6.1f} µs/call  (text/parse = {parse:.2f})")


if __name__ == "__main__":
    sys.exit(main())
