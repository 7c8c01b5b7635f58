"""`pytest` on a 1,000-case eval of a trivial step, cold and fully cached, against calling
`launch` directly on the same workflow and inputs (each in a fresh process, so both pay for
interpreter start-up and imports). Targets: plugin overhead under 1.5 x direct; a fully
cached run under 3 s."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

CASES = 1000


def eval_source(cases: int) -> str:
    """The eval module: a trivial step over ``cases`` parametrized cases."""
    return textwrap.dedent(
        f"""
        from typing import Annotated

        import pytest

        from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow

        @step(name="bench.double")
        async def double(context: StepContext, x: int) -> int:
            return 2 * x

        @workflow(name="bench.eval")
        async def evaluate(
            context: WorkflowContext, x: Annotated[ArrayHandle[int], "[case: str]"]
        ) -> Annotated[ArrayHandle[int], "[case: str]"]:
            return context.run_step("double", double, {{"x": x}}, map_over=["case"])

        @pytest.mark.fxtr(evaluate)
        @pytest.mark.parametrize("x", list(range({cases})))
        def test_double(x, result):
            assert result == 2 * x
    """
    )


EVAL = eval_source(CASES)

PLAIN = textwrap.dedent(
    f"""
    import pytest

    @pytest.mark.parametrize("x", list(range({CASES})))
    def test_double(x):
        assert 2 * x == x + x
    """
)

DIRECT = textwrap.dedent(
    """
    import sys
    from fxtr import Array, run
    from test_bench import evaluate

    x = Array.from_mapping({str(i): i for i in range(CASES)}, dims=[("case", str)])
    result = run(evaluate, {"x": x}, store=sys.argv[1])
    assert result.status == "succeeded", result.status
    """
).replace("CASES", str(CASES))


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "test_bench.py").write_text(EVAL)
        (root / "direct.py").write_text(DIRECT)
        (root / "test_plain.py").write_text(PLAIN)
        pytest_cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "test_bench.py",
            "--fxtr-cache-dir",
            "store-pytest",
        ]
        direct = timed([sys.executable, "direct.py", "store-direct"], root)
        direct_cached = timed([sys.executable, "direct.py", "store-direct"], root)
        cold = timed(pytest_cmd, root)
        cached = timed(pytest_cmd, root)
        plain = timed(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plain.py"], root
        )
    print(f"{CASES}-case eval of a trivial step (each in a fresh process)")
    print(f"direct launch, cold      {direct:7.2f} s")
    print(f"direct launch, cached    {direct_cached:7.2f} s")
    print(f"plain pytest, same 1000 items without fxtr  {plain:7.2f} s")
    print(
        f"pytest, cold             {cold:7.2f} s   {cold / direct:5.2f} x direct; "
        f"fxtr's share over plain pytest {cold - plain:5.2f} s = "
        f"{(cold - plain) / direct:4.2f} x direct (target < 1.5)"
    )
    print(f"pytest, fully cached     {cached:7.2f} s   (target: under 3 s)")


if __name__ == "__main__":
    main()
