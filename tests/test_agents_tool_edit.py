"""A tool as the model sees it and as a review names it (issue 36 item 9, DESIGN §12, §13):
its description is the docstring's first paragraph; editing its code sends its calls to
review saying ``code of TOOL changed``, in pytest's summary and in ``fxtr cache why``."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import docstring_parser

from fxtr.agents import tool
from fxtr.agents._tool import first_paragraph

EVAL = textwrap.dedent(
    '''
    import pytest
    from fxtr.agents import Agent, tool, tool_call
    from fxtr.evals import Case, evaluate, includes, register_mock, user_text
    from fxtr.models import ToolMessage

    @tool
    def add(a: float, b: float) -> float:
        """Add two numbers,
        exactly.

        Use it for every sum: never add in your head.

        Args:
            a: the first number.
            b: the second number.
        """
        return a + b

    def calc(request):
        print("DESCRIPTION", repr(request.tools[0].description))
        if isinstance(request.context[-1], ToolMessage):
            return "It is " + request.context[-1].results[0].content
        a, b = user_text(request).split("+")
        return tool_call("add", a=float(a), b=float(b))

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes(), "agent": Agent(tools=(add,))})
    @pytest.mark.parametrize("model", [register_mock("calc-edit", calc)])
    @pytest.mark.parametrize("case", [Case(id="x", input="2+3", target="5")])
    def test_calc(model, case, result):
        assert result is not None
    '''
)


def test_the_description_is_the_first_paragraph_and_an_edit_says_code_of_the_tool(pytester):
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    path = pytester.makepyfile(test_calc=EVAL)
    first = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    first.assert_outcomes(passed=1)
    assert "DESCRIPTION 'Add two numbers, exactly.'" in first.stdout.str()
    path.write_text(EVAL.replace("return a + b", "return a + b + 0"))
    second = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    out = second.stdout.str()
    review = next(
        line for line in out.splitlines() if "needs_review: step 'fxtr.agents.tool'" in line
    )
    assert "cache conflict: code of test_calc:add changed. Rerun with" in review, review
    assert "(?)" not in review and "mock model" not in review and "input(s)" not in review
    address = re.search(r"at (\S+/tool\[0,0\]):", review).group(1)
    why = subprocess.run(
        [sys.executable, "-m", "fxtr.cli", "cache", "why", address],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert why.stdout.splitlines()[-1].strip() == "code of test_calc:add", why.stdout


@tool
def _documented(x: int) -> int:
    """Look a record up
    by its number.

    The record comes back as JSON.
    """
    return x


def test_first_paragraph_against_the_docstrings_own_paragraphs():
    """Independently: the text before the first blank line, its lines joined by spaces."""
    assert _documented.spec.description == "Look a record up by its number."
    for doc in ["One.", "One\ntwo.\n\nThree.", "One.\n\nArgs:\n    a: x.", "", "A\n\nB\n\nC"]:
        expected = " ".join(doc.split("\n\n")[0].split()) if not doc.startswith("Args") else ""
        assert first_paragraph(docstring_parser.parse(doc)) == expected
