"""The dry run's forecast against the real run, per eval and model (DESIGN §14, issue 37).

Two measures, each a ``pytest --fxtr-dry-run`` then the real ``pytest`` run in a subprocess:

- ``evals``: the evals of ``evals/`` copied to a new directory (an empty store: the cold
  forecast, from the requests alone);
- ``rerun``: a project of priced mock models (a plain judge, three judge samples with a gold
  set, and a tool-using agent), run once on ``--cases`` cases, then forecast and run on as
  many new cases of the same kind (the forecast from history).

Prints, per eval and model, the forecast and the real calls, tokens (input + output) and
dollars, and the relative error of each; then, per measure, the median over models of the
absolute error of the tokens and of the dollars (the target is 20%).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

PROJECT = textwrap.dedent(
    """
    import os
    import random

    import pytest

    from fxtr.agents import Agent, tool, tool_call
    from fxtr.evals import (Case, evaluate, includes, mock_judge, model_graded_fact,
                            register_mock)

    FIRST = int(os.environ.get("BENCH_FIRST", "0"))
    N = int(os.environ.get("BENCH_CASES", "20"))

    def words(seed, mean):
        r = random.Random(seed)
        return " ".join(["word"] * max(1, round(r.gauss(mean, mean / 3))))

    def subject(request):
        text = request.context[-1].content[0].text
        return "The answer: " + words(text, 40)

    def terse(request):
        text = request.context[-1].content[0].text
        return words(text + "t", 6)

    GOLD = [Case(id=f"g{i}", input=f"Gold {i}?", target="word",
                 metadata={"completion": words(i, 30), "label": 1}) for i in range(6)]
    CASES = [Case(id=f"c{i}", input=f"Question {i}: " + "lorem " * (5 + i % 30) + "?",
                  target="word") for i in range(FIRST, FIRST + N)]

    SUBJECT = register_mock("bf-subject", subject, price_as="gpt-5-mini")
    TERSE = register_mock("bf-terse", terse, price_as="gpt-4o-mini")
    JUDGE = model_graded_fact(mock_judge("bf-judge", price_as="gpt-4.1-mini"))
    AUDITED = model_graded_fact(mock_judge("bf-audit", price_as="claude-haiku-4-5"),
                                judge_samples=3, calibration=GOLD)

    @tool
    def look(query: str) -> str:
        \"\"\"Look something up.\"\"\"
        return words(query, 25)

    def agent(request):
        turns = sum(type(m).__name__ == "AssistantMessage" for m in request.context)
        text = request.context[0].content[0].text
        if turns < 1 + len(text) % 3:
            return tool_call("look", query=f"{text} {turns}")
        return "Found: " + words(text, 15)

    AGENT = register_mock("bf-agent", agent, price_as="gpt-5-mini")

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": JUDGE})
    @pytest.mark.parametrize("model", [SUBJECT, TERSE])
    @pytest.mark.parametrize("case", CASES)
    def test_judged(model, case, result):
        assert result is not None

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": AUDITED})
    @pytest.mark.parametrize("model", [TERSE])
    @pytest.mark.parametrize("case", CASES)
    def test_audited(model, case, result):
        assert result is not None

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes(), "agent": Agent(tools=(look,))})
    @pytest.mark.parametrize("model", [AGENT])
    @pytest.mark.parametrize("case", CASES)
    def test_agent(model, case, result):
        assert result is not None
    """
)


def _pytest(where: Path, *args: str, env: dict[str, str] | None = None) -> None:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    done = subprocess.run(
        [*cmd, *args], cwd=where, env={**os.environ, **(env or {})}, capture_output=True,
        text=True, check=False,
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"pytest {' '.join(args)} exited {done.returncode}:\n{done.stdout}")


def _compare(
    where: Path, path: str, env: dict[str, str] | None = None
) -> list[tuple[Any, ...]]:
    """Dry run, real run; per eval and model: forecast and real calls, tokens, dollars."""
    _pytest(where, path, "--fxtr-dry-run", "--fxtr-report", "dry.json", env=env)
    _pytest(where, path, "--fxtr-report", "real.json", env=env)
    dry = json.loads((where / "dry.json").read_text())["dry_run"]
    real = {job["eval"]: job for job in json.loads((where / "real.json").read_text())["jobs"]}
    rows = []
    for plan in dry:
        job = real.get(plan["eval"])
        if job is None:
            continue
        spent = job["cost"]["by_model"]
        for row in plan["by"]:
            if not row["calls"] or "/" not in row["model"]:
                continue
            actual = spent.get(row["model"].partition("/")[2])
            if actual is None:
                continue
            rows.append(
                (
                    plan["eval"].rpartition("::")[2], row["model"], row["calls"], actual["calls"],
                    row["input_tokens"] + row["output_tokens"],
                    actual["input_tokens"] + actual["output_tokens"], row["usd"], actual["usd"],
                )
            )
    return rows


def _error(forecast: float | None, real: float | None) -> float | None:
    if forecast is None or not real:
        return None
    return (forecast - real) / real


def _print(title: str, rows: list[tuple[Any, ...]]) -> None:
    print(f"\n{title}")
    print(
        f"{'eval':<24} {'model':<24} {'calls':>11} {'tokens':>17} {'error':>7} "
        f"{'dollars':>21} {'error':>7}"
    )
    token_errors, usd_errors = [], []
    for name, model, fc, rc, ft, rt, fu, ru in rows:
        te, ue = _error(ft, rt), _error(fu, ru)
        token_errors += [abs(te)] if te is not None else []
        usd_errors += [abs(ue)] if ue is not None else []
        money = f"{fu:.6f}/{ru:.6f}" if fu is not None and ru is not None else "n/a"
        print(
            f"{name:<24} {model:<24} {fc:>5}/{rc:<5} {ft:>8}/{rt:<8} "
            f"{'' if te is None else f'{te:+.0%}':>7} {money:>21} "
            f"{'' if ue is None else f'{ue:+.0%}':>7}"
        )
    for what, errors in (("tokens", token_errors), ("dollars", usd_errors)):
        if errors:
            print(
                f"median |error| of the {what} over {len(errors)} model(s): "
                f"{statistics.median(errors):.1%}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--skip-evals", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fxtr-bench-forecast-"))
    try:
        if not args.skip_evals:
            cold = work / "evals"
            shutil.copytree(ROOT / "evals", cold / "evals")
            shutil.copy(ROOT / "pyproject.toml", cold / "pyproject.toml")
            _print("evals/, cold (an empty store):", _compare(cold, "evals"))
        rerun = work / "rerun"
        rerun.mkdir()
        (rerun / "test_bench.py").write_text(PROJECT)
        ini = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        (rerun / "pytest.ini").write_text(ini)
        cases = {"BENCH_CASES": str(args.cases)}
        _print("priced project, cold:", _compare(rerun, "test_bench.py", cases))
        again = {**cases, "BENCH_FIRST": str(args.cases)}
        warm = _compare(rerun, "test_bench.py", again)
        _print("priced project, new cases after a run (history):", warm)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
