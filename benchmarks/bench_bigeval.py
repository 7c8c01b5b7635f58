"""A big eval: time to first work, resume cost and peak memory at 200,000 and 50,000 invocations.

The job is one ``map_over`` of N keys of a trivial step, 1% of which fail in the first
attempt (they succeed when resumed). Each figure comes from a fresh process (``--child``):

- cold: seconds from ``launch()`` to the first step body, the wall time of the whole
  attempt (verification on, as users run it) and the peak RSS of the process;
- resume: seconds from ``resume()`` to the first re-run body, its wall time and peak RSS;
- then ``fxtr show`` and ``fxtr jobs`` on the job's store, each in a fresh process (the
  import of fxtr included), and the viewer's first screen of the job (``timed_viewer``).

The same job is also run on today's code path: the ``src/`` of ``--baseline REF`` (default
``3f6da97``, the release before the streamed plan: the "today" of issue 25), extracted
with ``git archive`` into a temporary directory and put first on the child's
``PYTHONPATH``; the ratios printed are this tree's figures over that one's, measured
in the same run (machines are noisy: compare ratios, not seconds). With ``--baseline none``
it is left out. Targets (issue 25): at 200,000, first body <= 2 s, first re-run body <= 5 s,
both peaks <= 400 MiB, cold wall time ratio <= 1, ``fxtr show`` < 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

from fxtr import Array, ArrayHandle, StepContext, WorkflowContext, step, workflow

FAIL_EVERY = 100
"""One key in this many fails in the first attempt (1%)."""
_state: dict[str, Any] = {"fail": False, "first": None}


@step(name="bigeval.double")
async def double(context: StepContext, x: int) -> int:
    if _state["first"] is None:
        _state["first"] = time.perf_counter()
    if _state["fail"] and x % FAIL_EVERY == 0:
        msg = f"key {x} fails in the first attempt"
        raise ValueError(msg)
    return 2 * x


@workflow(name="bigeval.big")
async def big(
    context: WorkflowContext, xs: Annotated[ArrayHandle[int], "[key: int]"]
) -> Annotated[ArrayHandle[int], "[key: int]"]:
    return context.run_step("double", double, {"x": xs}, map_over=["key"])


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(mode: str, n: int, store: str, job_id: str) -> dict[str, Any]:
    """One cold launch or one resume, in this (fresh) process."""
    from fxtr import launch, resume

    if mode == "cold":
        _state["fail"] = True
        xs = Array.from_mapping({i: i for i in range(n)}, dims=["key"], value_type=int)
        t0 = time.perf_counter()
        result = asyncio.run(launch(big, {"xs": xs}, store=store, job_id=job_id))
    else:
        t0 = time.perf_counter()
        result = asyncio.run(resume(job_id, store=store, workflow=big))
    wall = time.perf_counter() - t0
    first = _state["first"]
    statuses: dict[str, int] = {}
    ran = 0
    for inv in result.invocations:
        statuses[inv.status] = statuses.get(inv.status, 0) + 1
        ran += not inv.from_cache and inv.status != "skipped"
    return {
        "first": None if first is None else first - t0,
        "wall": wall,
        "peak_mib": _peak_mib(),
        "status": result.status,
        "attempt": result.attempt,
        "statuses": statuses,
        "ran": ran,
    }


def timed_cli(store: str, *argv: str) -> float:
    """Seconds ``fxtr --store STORE ARGV`` takes in this process (its output discarded)."""
    import contextlib
    import io

    from fxtr.cli import main as fxtr_main

    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        fxtr_main(["--store", store, *argv])
    return time.perf_counter() - t0


def timed_viewer(store: str, job_id: str) -> float:
    """Seconds the viewer's first screen of a job takes in this process: the jobs list, the
    job's head, its operations graph and the first page of its failed invocations (the
    JSON the page asks for, without the HTTP server around it)."""
    from fxtr.cli._server import Viewer
    from fxtr.store import open_store

    t0 = time.perf_counter()
    viewer = Viewer(open_store(store))
    viewer.jobs()
    viewer.route(f"/api/jobs/{job_id}", {})
    viewer.route(f"/api/jobs/{job_id}/graph", {})
    viewer.route(f"/api/jobs/{job_id}/invocations", {"status": ["failed"]})
    return time.perf_counter() - t0


def _spawn_viewer(store: str, pythonpath: str, job_id: str) -> float:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    code = (
        "import sys; from benchmarks.bench_bigeval import timed_viewer; "
        "print(timed_viewer(sys.argv[1], sys.argv[2]))"
    )
    args = [sys.executable, "-c", code, store, job_id]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def _spawn_cli(store: str, pythonpath: str, *argv: str) -> float:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    code = (
        "import sys; from benchmarks.bench_bigeval import timed_cli; "
        "print(timed_cli(sys.argv[1], *sys.argv[2:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, store, *argv],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def _spawn(mode: str, n: int, store: str, job_id: str, pythonpath: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    args = [sys.executable, "-m", "benchmarks.bench_bigeval", "--child", mode, "--n", str(n)]
    args += ["--store", store, "--job-id", job_id]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        msg = f"the {mode} child (n={n}) failed:\n{done.stderr[-3000:]}"
        raise RuntimeError(msg)
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _baseline_src(ref: str, into: Path) -> Path:
    repo = Path(__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "archive", ref, "src"], cwd=repo, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def _line(label: str, r: dict[str, Any]) -> str:
    first = "-" if r["first"] is None else f"{r['first']:6.2f} s"
    return (
        f"  {label:26} first body {first:>8}   wall {r['wall']:6.1f} s   "
        f"peak {r['peak_mib']:6.0f} MiB   {r['status']} ({r['ran']} ran)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", choices=["cold", "resume"])
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--store")
    parser.add_argument("--job-id", default="bigeval")
    parser.add_argument("--sizes", default="200000,50000", help="comma-separated N")
    parser.add_argument(
        "--baseline", default="3f6da97", help="git ref of today's code path, or 'none'"
    )
    parser.add_argument("--rounds", type=int, default=1, help="alternating runs; best of them")
    parser.add_argument("--listing", help="K,N: time fxtr jobs on K jobs of N invocations")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.store, args.job_id)))
        return
    repo = Path(__file__).resolve().parent.parent
    here = f"{repo / 'src'}{os.pathsep}{repo}"
    tmp = Path(tempfile.mkdtemp(prefix="bench_bigeval"))
    try:
        base = None
        if args.baseline != "none":
            base = f"{_baseline_src(args.baseline, tmp)}{os.pathsep}{repo}"
        trees = [("this tree", here)] + ([(args.baseline, base)] if base else [])
        for n in (int(s) for s in args.sizes.split(",")):
            print(f"{n} invocations, {n // FAIL_EVERY} failing in the first attempt")
            best: dict[str, dict[str, float]] = {}
            for r in range(args.rounds):  # alternating, so that both see the same machine
                for label, path in trees:
                    store = str(tmp / f"{label.replace(' ', '-')}-{n}-{r}")
                    cold = _spawn("cold", n, store, "bigeval", path)
                    print(_line(f"cold ({label})", cold))
                    again = _spawn("resume", n, store, "bigeval", path)
                    print(_line(f"resume ({label})", again))
                    show = _spawn_cli(store, path, "show", "bigeval")
                    jobs = _spawn_cli(store, path, "jobs")
                    screen = _spawn_viewer(store, path, "bigeval") if path == here else None
                    print(
                        f"  fxtr show {show:5.2f} s   fxtr jobs {jobs:5.2f} s   "
                        + (f"viewer first screen {screen:5.2f} s   " if screen else "")
                        + f"({label}, fresh processes)"
                    )
                    figures = {"wall": cold["wall"], "first": cold["first"] or 0.0,
                               "again": again["first"] or 0.0}  # fmt: skip
                    mins = best.setdefault(label, figures)
                    for key, value in figures.items():
                        mins[key] = min(mins[key], value)
            if base is not None:
                new, old = best["this tree"], best[args.baseline]
                print(
                    f"  best of {args.rounds}: cold wall this tree / {args.baseline}: "
                    f"{new['wall'] / old['wall']:.2f}   first body: "
                    f"{new['first'] / old['first']:.2f}   first re-run body: "
                    f"{new['again'] / old['again']:.2f}"
                )
        if args.listing:
            _listing(args.listing, tmp / "listing", here)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _listing(spec: str, store: Path, pythonpath: str) -> None:
    """``fxtr jobs`` on a store of K jobs of N invocations each (``--listing K,N``)."""
    k, n = (int(v) for v in spec.split(","))
    for i in range(k):
        _spawn("cold", n, str(store), f"bigeval-{i}", pythonpath)
    runs = [_spawn_cli(str(store), pythonpath, "jobs") for _ in range(3)]
    print(f"fxtr jobs on {k} jobs of {n} invocations: {min(runs):.2f} s (best of 3, fresh process)")


if __name__ == "__main__":
    main()
