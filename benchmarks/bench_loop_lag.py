"""fxtr's own work on the event loop, against a loopback OpenAI-compatible server (issue 37
item 9).

A project of ``--cases`` cases x 2 models (the Responses API and an openai-compatible chat
model) graded by a judge on the same server runs under pytest in a subprocess, with
``--load`` busy processes beside it. Prints the wall time and how many times the loop
watchdog said a step blocked the event loop (it names the step after 1 s without a beat).
With ``--against DIR`` (a checkout of another commit, say one made with ``git worktree
add``), the same run with that code, and the ratio of the wall times.

Measured on 2 cores, 1,000 cases, 3 busy processes: ``8b4fef9`` (an HTTP client made per
call) 185 s and a warning naming ``fxtr.generate``; one client per server, key and loop:
47 s and none.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

SERVER = textwrap.dedent(
    """
    import json, random, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            time.sleep(random.uniform(0.05, 0.4))
            graded = "GRADE" in json.dumps(body)
            text = "GRADE: C" if graded else "The answer is " + "word " * random.randint(5, 200)
            if self.path.endswith("/responses"):
                payload = {"id": "r", "object": "response", "model": body.get("model"),
                           "status": "completed",
                           "output": [{"type": "message", "role": "assistant",
                                       "content": [{"type": "output_text", "text": text}]}],
                           "usage": {"input_tokens": 30, "output_tokens": len(text) // 4}}
            else:
                payload = {"id": "c", "model": body.get("model"),
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": text}}],
                           "usage": {"prompt_tokens": 30, "completion_tokens": len(text) // 4}}
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    print(server.server_address[1], flush=True)
    server.serve_forever()
    """
)

PROJECT = textwrap.dedent(
    """
    import os

    import pytest

    from fxtr.evals import Case, Model, evaluate, model_graded_fact

    URL = os.environ["BENCH_URL"]
    MODELS = [Model("openai/gpt-4o-mini", base_url=URL),
              Model("openai-compatible/gpt-4.1-mini", base_url=URL)]
    JUDGE = Model("openai-compatible/gpt-4.1", base_url=URL)
    CASES = [Case(id=f"c{i}", input=f"Question {i}? " + "lorem ipsum " * (i % 50),
                  target="word") for i in range(int(os.environ["BENCH_CASES"]))]

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": model_graded_fact(JUDGE)})
    @pytest.mark.parametrize("model", MODELS)
    @pytest.mark.parametrize("case", CASES)
    def test_lag(model, case, result):
        assert result is not None
    """
)


def _run(code: Path | None, cases: int, url: str) -> tuple[float, int, str]:
    """Wall seconds, watchdog warnings and the last line of one cold run."""
    with tempfile.TemporaryDirectory(prefix="fxtr-bench-lag-") as where:
        (Path(where) / "test_lag.py").write_text(PROJECT)
        ini = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        (Path(where) / "pytest.ini").write_text(ini)
        env = {**os.environ, "BENCH_URL": url, "BENCH_CASES": str(cases),
               "OPENAI_API_KEY": "sk-bench-loop-lag"}  # fmt: skip
        if code is not None:
            env["PYTHONPATH"] = f"{code / 'src'}{os.pathsep}{code}"
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
             "log_cli=true", "--log-cli-level=WARNING"],
            cwd=where, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        seconds = time.monotonic() - started
    warnings = done.stdout.count("has blocked the event loop")
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    return seconds, warnings, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--load", type=int, default=2, help="busy processes beside the run")
    parser.add_argument("--against", type=Path, help="a checkout of another commit")
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    url = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1"
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)
    ]
    try:
        here = _run(None, args.cases, url)
        print(f"this checkout: {here[0]:.1f} s, {here[1]} watchdog warning(s); {here[2]}")
        if args.against is not None:
            there = _run(args.against.resolve(), args.cases, url)
            print(f"{args.against}: {there[0]:.1f} s, {there[1]} watchdog warning(s); {there[2]}")
            print(f"ratio (this / that): {here[0] / there[0]:.2f}")
    finally:
        for p in [*burners, server]:
            p.kill()


if __name__ == "__main__":
    main()
