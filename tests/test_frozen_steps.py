"""The code of the library's own steps is in the fingerprint of every result a store holds.

Editing the body of ``fxtr.generate``, ``fxtr.score``, an agent's ``turn`` or ``tool`` step
would send every cached answer, score, turn or tool call of every user's store to review (or,
under overwrite, pay for them again): this happened twice while sandboxes and time limits were
added, and was caught only by the migration test of an agent store. The hashes below are those
of the code stores were written with; a failing assertion means a step's body changed. Move
the new logic into a helper the step calls (its code is not in the fingerprint), into another
step, or, when results really change, say so: give the step a ``version=`` and update here.
"""

from __future__ import annotations

import pytest

import fxtr.agents._loop as loop
import fxtr.agents._tool_steps as tool_steps
import fxtr.evals._evaluate as kit
import fxtr.evals._judging as judging

FROZEN = {
    # as written by 8b4fef9 (the stores of every fxtr before it hold entries of these)
    (loop, "turn"): "9db6cb2e99b2dbf9",
    (loop, "simulate_user"): "60ea8d963fed34d9",
    (loop, "score_trajectory"): "697a4b7803c73006",
    (loop, "finish"): "5e62a021533b15a3",
    (tool_steps, "run_tool"): "ea775be90844249e",
    (tool_steps, "build_env"): "c6d3a635ef8ac954",
    (kit, "generate"): "6113a97d6e109c99",
    (kit, "score"): "6225ec7b5de6ba7c",
    (judging, "judge"): "877c736b20b55a99",
    (judging, "judge_gold"): "19a4e3f5374760bf",
    (judging, "judge_vote"): "c3c24a99f01c1d64",
    (judging, "pairwise_judge"): "105d9cfe969c0f5b",
    (judging, "pairwise_verdict"): "83c3935f132e3e2f",
}


@pytest.mark.parametrize(("module", "name"), list(FROZEN), ids=lambda v: getattr(v, "__name__", v))
def test_the_code_of_a_library_step_stores_hold_results_of_is_unchanged(module, name):
    definition = getattr(module, name)
    assert definition.version is None
    assert definition.source_hash == FROZEN[module, name], (
        f"The body of step {definition.name!r} changed: every result of it that stores hold "
        "would go to review. Move the change into a helper or another step (see this file's "
        "docstring)."
    )
