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


ENTITY_FIELDS = {
    # the fields of the library's entities in the stores of 8b4fef9 and before
    "fxtr.agents._scorers:TrajectoryScorer": (
        "kind",
        "ignore_case",
        "location",
        "regex",
        "match_all",
        "tolerance",
        "multiple_correct",
        "judge",
        "template",
        "instructions",
        "grade_pattern",
        "grade_words",
        "grades",
        "function",
        "code",
        "tool",
        "arguments",
    ),
    "fxtr.agents._tool:Tool": ("path", "spec", "code", "uses_env"),
    "fxtr.agents._types:Agent": (
        "tools",
        "system",
        "env",
        "env_code",
        "max_turns",
        "token_limit",
        "cost_limit",
        "time_limit",
        "submit",
        "user",
    ),
    "fxtr.agents._types:Environment": ("state",),
    "fxtr.agents._types:ToolOutcome": ("result", "env", "seconds"),
    "fxtr.agents._types:Trajectory": (
        "messages",
        "answer",
        "stop",
        "env",
        "turns",
        "tool_calls",
        "tool_errors",
        "usage",
        "cost",
        "simulated",
    ),
    "fxtr.agents._types:Turn": ("response", "seconds"),
    "fxtr.agents._types:UserSim": ("model", "instructions", "stop"),
    "fxtr.evals._cases:Case": ("id", "input", "target", "choices", "metadata"),
    "fxtr.evals._models:Model": ("name", "sampling", "system", "base_url"),
    "fxtr.evals._scorers:AuditedScorer": (
        "kind",
        "ignore_case",
        "location",
        "regex",
        "match_all",
        "tolerance",
        "multiple_correct",
        "judge",
        "template",
        "instructions",
        "grade_pattern",
        "grade_words",
        "grades",
        "calibration",
        "judge_samples",
        "against",
    ),
    "fxtr.evals._scorers:Score": ("value", "answer", "explanation"),
    "fxtr.evals._scorers:Scorer": (
        "kind",
        "ignore_case",
        "location",
        "regex",
        "match_all",
        "tolerance",
        "multiple_correct",
        "judge",
        "template",
        "instructions",
        "grade_pattern",
        "grade_words",
        "grades",
    ),
    "fxtr.models._types:AssistantMessage": ("content", "tool_calls"),
    "fxtr.models._types:ContentText": ("text",),
    "fxtr.models._types:ModelCallFailure": (
        "category",
        "description",
        "status_code",
        "retry_after",
    ),
    "fxtr.models._types:ModelRequest": (
        "context",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "sampling",
    ),
    "fxtr.models._types:ModelResponse": ("output", "usage", "cost", "stop_reason", "model"),
    "fxtr.models._types:RetryConfig": (
        "max_attempts",
        "initial_delay",
        "max_delay",
        "jitter",
        "total_budget",
    ),
    "fxtr.models._types:Sampling": ("temperature", "max_tokens", "top_p", "seed", "stop"),
    "fxtr.models._types:SystemMessage": ("content",),
    "fxtr.models._types:ToolCall": ("id", "name", "arguments"),
    "fxtr.models._types:ToolMessage": ("results",),
    "fxtr.models._types:ToolResult": ("tool_call_id", "content", "is_error"),
    "fxtr.models._types:ToolSpec": ("name", "description", "parameters"),
    "fxtr.models._types:Usage": ("input_tokens", "output_tokens", "cached_input_tokens"),
    "fxtr.models._types:UserMessage": ("content",),
}


def test_a_field_added_to_a_library_entity_is_declared_added():
    """A field added to an entity changes the encoding (so the id and every fingerprint) of
    each of its values, unless it is in ``__added_fields__``: then a value holding the default
    encodes as before the field existed, and what stores hold keeps serving."""
    import fxtr.agents
    import fxtr.evals  # noqa: F401
    from fxtr.experiment._entity import _REGISTRY

    for key, before in ENTITY_FIELDS.items():
        cls = _REGISTRY[key]
        new = set(cls.__entity_fields__) - set(before)
        undeclared = new - set(cls.__added_fields__)
        assert not undeclared, (
            f"{key} gained {sorted(undeclared)}: list them in its __added_fields__ (with "
            "defaults), or every stored value of it stops matching"
        )
        assert set(before) <= set(cls.__entity_fields__), f"{key} lost a field"
