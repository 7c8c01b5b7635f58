"""A list of scorers given to ``evaluate`` (issue 36 item 7): refused at launch with a whole
message that says how to score with several, not a cut-off ``SignatureError``."""

from __future__ import annotations

import textwrap

import pytest

import fxtr
from fxtr.evals import Case, evaluate, exact, includes, register_mock
from fxtr.experiment.arrays import Array
from fxtr.experiment.errors import SignatureError

EVAL = textwrap.dedent(
    """
    import pytest
    from fxtr.evals import Case, evaluate, exact, includes, register_mock

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": [includes(), exact()]})
    @pytest.mark.parametrize("model", [register_mock("two-scorers", "Paris")])
    @pytest.mark.parametrize("case", [Case(id="x", input="capital?", target="Paris")])
    def test_two(model, case, result):
        assert result is not None
    """
)

HOW = (
    "input 'scorer' takes one Scorer, got a list of 2. An eval scores with one scorer: for "
    "several, write one eval (test function) per scorer, each with its own threshold"
)


def test_a_list_of_scorers_in_the_marker_is_refused_saying_how(pytester):
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_two=EVAL)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = " ".join(result.stdout.str().split())
    assert HOW in out, out
    assert "With an agent, scorer(FUNCTION) may also grade several things into one Score." in out


def test_a_list_of_scorers_given_to_run_is_refused_saying_how(tmp_path):
    mock = register_mock("two-scorers-run", "Paris")
    inputs = {
        "model": Array.from_mapping({mock.name: mock}, dims=["model"]),
        "case": Array.from_mapping({"x": Case(id="x", input="q", target="Paris")}, dims=["case"]),
        "scorer": (includes(), exact()),
    }
    with pytest.raises(SignatureError) as refused:
        fxtr.run(evaluate, inputs, store=tmp_path)
    assert str(refused.value).startswith(
        "Launching workflow 'fxtr.evaluate': input 'scorer' takes one Scorer, got a tuple of 2."
    )
    assert "one eval (test function) per scorer" in str(refused.value)
