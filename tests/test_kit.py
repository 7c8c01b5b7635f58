"""The eval kit end to end: datasets, models, the evaluate workflow on the real engine, judges
(cached, reviewed when their template changes), samples seeded per index, and the providers
behind ``Model.api()`` at the network boundary (respx)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
import respx

import fxtr
from fxtr.evals import (
    DEFAULT_MODEL_GRADED_FACT_TEMPLATE,
    Case,
    CaseFileError,
    Model,
    Score,
    choice,
    default_instructions,
    evaluate,
    exact,
    includes,
    load_cases,
    model_graded_fact,
    model_graded_qa,
    numeric,
    register_mock,
)
from fxtr.evals._evaluate import request_for
from fxtr.experiment.arrays import Array
from fxtr.models import (
    AnthropicMessagesAPI,
    ModelRequest,
    OpenAIChatAPI,
    OpenAIResponsesAPI,
    Sampling,
)

# --- datasets ---------------------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


CAPITALS = [
    {"input": "What is the capital of France?", "target": "Paris", "topic": "geo"},
    {"input": "What is 2 + 2?", "target": ["4", "four"], "topic": "math"},
    {"input": "Who wrote Hamlet?", "target": "Shakespeare", "topic": "books"},
]


def test_jsonl_cases_get_stable_content_ids_and_keep_other_columns(tmp_path):
    lines = [json.dumps(r) for r in CAPITALS]
    cases = load_cases(_write(tmp_path / "a.jsonl", "\n".join(lines) + "\n\n"))
    assert [c.input for c in cases] == [r["input"] for r in CAPITALS]
    assert cases[1].target == ["4", "four"] and cases[1].targets == ["4", "four"]
    assert cases[0].metadata == {"topic": "geo"}
    assert re.fullmatch(r"what-is-the-capital-[0-9a-f]{10}", cases[0].id)
    assert cases[0].__fxtr_id__() == cases[0].id
    # reordered, with a new case in front: every old case keeps its id (so its cache entries)
    extra = json.dumps({"input": "New?", "target": "x", "topic": "t"})
    moved = load_cases(_write(tmp_path / "b.jsonl", "\n".join([extra, *reversed(lines)])))
    assert {c.id for c in cases} <= {c.id for c in moved}
    changed = load_cases(_write(tmp_path / "c.jsonl", lines[0].replace("Paris", "Lyon")))
    assert changed[0].id != cases[0].id  # content changed, so the id did


def test_json_and_csv_with_column_mapping_choices_and_metadata(tmp_path):
    rows = [
        {"q": "Capital of Italy?", "a": "B", "key": "it", "A": "Paris", "B": "Rome", "lvl": 1},
        {"q": "Capital of Spain?", "a": "A", "key": "es", "A": "Madrid", "B": "Rome", "lvl": 2},
    ]
    cases = load_cases(
        _write(tmp_path / "mc.json", json.dumps(rows, indent=2)),
        id="key",
        input="q",
        target="a",
        choices=["A", "B"],
        metadata=["lvl"],
    )
    assert cases[0] == Case(
        id="it",
        input="Capital of Italy?",
        target="B",
        choices=("Paris", "Rome"),
        metadata={"lvl": 1},
    )
    csv_text = (
        'id,input,target,options\nx1,"Largest planet, by mass?",Jupiter,"[""Jupiter"", ""Mars""]"\n'
    )
    (case,) = load_cases(_write(tmp_path / "p.csv", csv_text), id="id", choices="options")
    assert case.input == "Largest planet, by mass?" and case.choices == ("Jupiter", "Mars")
    assert case.metadata == {}
    (no_target,) = load_cases(_write(tmp_path / "n.jsonl", '{"input": "hi"}'), target=None)
    assert no_target.target is None


def test_a_relative_path_is_found_from_the_calling_module_and_an_id_column_is_used():
    cases = load_cases("evals/data/capitals.jsonl")  # tests/ → repo root → evals/data
    assert len(cases) >= 5 and all(c.target for c in cases)
    assert cases[0].id == "france" and "id" not in cases[0].metadata


@pytest.mark.parametrize(
    ("name", "text", "kwargs", "line", "words"),
    [
        (
            "broken.jsonl",
            '{"input": "a", "target": "b"}\n{"input": "c", "target": \n',
            {},
            2,
            ["not a JSON object", "fix this line or delete it"],
        ),
        (
            "missing.jsonl",
            '{"input": "a", "target": "b"}\n{"input": "c"}\n',
            {},
            2,
            ["no column 'target'", "target=None"],
        ),
        (
            "dupe.jsonl",
            '{"id": "x", "input": "a", "target": "b"}\n\n{"id": "x", "input": "c", "target": "d"}\n',
            {"id": "id"},
            3,
            ["'x' is also the id of line 1", "own id"],
        ),
        (
            "same.jsonl",
            '{"input": "a", "target": "b"}\n{"input": "a", "target": "b"}\n',
            {},
            2,
            ["same content as line 1", "pass id="],
        ),
        (
            "syntax.json",
            '[\n {"input": "a", "target": "b"},\n {"input": "c" "target": "d"}\n]',
            {},
            3,
            ["not valid JSON"],
        ),
        (
            "item.json",
            '[\n {"input": "a", "target": "b"},\n "just text"\n]',
            {},
            3,
            ["must be a JSON object"],
        ),
        (
            "ragged.csv",
            "input,target\na,b\nc,d,e\n",
            {},
            3,
            ["3 cells but the header has 2", "Quote"],
        ),
        ("short.csv", "input,target\na,b\nc\n", {}, 3, ["1 cells but the header has 2"]),
        ("badtarget.jsonl", '{"input": "a", "target": {"x": 1}}\n', {}, 1, ["target", "a string"]),
        (
            "nochoices.jsonl",
            '{"input": "a", "target": "A", "opts": "A or B"}\n',
            {"choices": "opts"},
            1,
            ["not a list of strings"],
        ),
    ],
)
def test_bad_data_names_the_file_the_line_and_the_fix(tmp_path, name, text, kwargs, line, words):
    path = _write(tmp_path / name, text)
    with pytest.raises(CaseFileError) as info:
        load_cases(path, **kwargs)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: "), message
    for word in words:
        assert word in message, message
    assert isinstance(info.value, ValueError) and info.value.line == line


def test_files_that_cannot_be_datasets(tmp_path):
    with pytest.raises(ValueError, match=r"unknown dataset suffix '\.txt'.*\.jsonl"):
        load_cases(_write(tmp_path / "a.txt", "x"))
    with pytest.raises(ValueError, match="no such file"):
        load_cases(tmp_path / "nope.jsonl")
    with pytest.raises(ValueError, match="has no cases"):
        load_cases(_write(tmp_path / "empty.jsonl", "\n\n"))


# --- models -----------------------------------------------------------------------------


def test_model_names_and_the_clients_they_build():
    api = Model("openai/gpt-5-mini").api()
    assert isinstance(api, OpenAIResponsesAPI) and api.model_name == "gpt-5-mini"
    api = Model("anthropic/claude-haiku-4-5").api()
    assert isinstance(api, AnthropicMessagesAPI) and api.model_name == "claude-haiku-4-5"
    local = Model("openai-compatible/llama-3.1-8b", base_url="http://localhost:8000/v1")
    api = local.api()
    assert type(api) is OpenAIChatAPI and str(api.base_url).startswith("http://localhost:8000/v1")
    assert local.__fxtr_id__() == "openai-compatible/llama-3.1-8b"
    with pytest.raises(ValueError, match="needs base_url="):
        Model("openai-compatible/llama")
    with pytest.raises(ValueError, match=r"'gpt-4o' is not 'provider/model'.*openai/gpt-5-mini"):
        Model("gpt-4o")
    with pytest.raises(LookupError, match=r"register_mock\('never-registered', reply\)"):
        Model("mock/never-registered").api()


def test_sampling_and_system_prompt_reach_the_request_and_mocks_are_seeded_by_sample():
    model = Model("mock/x", sampling=Sampling(temperature=0.7, seed=10), system="Be brief.")
    request = request_for(model, "Hi", 3)
    assert [type(m).__name__ for m in request.context] == ["SystemMessage", "UserMessage"]
    assert request.sampling == Sampling(temperature=0.7, seed=13)
    real = Model("openai/gpt-5-mini", sampling=Sampling(temperature=0.7))
    assert request_for(real, "Hi", 3).sampling == Sampling(temperature=0.7)  # real: no seed added


# --- the evaluate workflow on the engine ------------------------------------------------

CALLS: list[str] = []


def _question(request: ModelRequest) -> str:
    return request.context[-1].content[0].text


def _small(request: ModelRequest) -> str:
    CALLS.append("small")
    q = _question(request)
    return "Paris." if "France" in q else "I am not sure."


def _large(request: ModelRequest) -> str:
    CALLS.append("large")
    q = _question(request)
    return {"France": "It is Paris.", "2 + 2": "four", "Hamlet": "William Shakespeare"}[
        next(k for k in ("France", "2 + 2", "Hamlet") if k in q)
    ]


SMALL = register_mock("kit-small", _small)
LARGE = register_mock("kit-large", _large)
CASES = [
    Case(id=f"c{i}", input=r["input"], target=r["target"], metadata={"topic": r["topic"]})
    for i, r in enumerate(CAPITALS)
]


def _inputs(scorer, samples=1, cases=CASES, models=(SMALL, LARGE)):
    return {
        "model": Array.from_mapping({m.name: m for m in models}, dims=["model"]),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"]),
        "scorer": scorer,
        "samples": samples,
    }


@pytest.fixture(autouse=True)
def _clear_calls():
    CALLS.clear()


def _values(result) -> dict[tuple, float]:
    return {key: score.value for key, score in result.output.items()}


def test_evaluate_scores_every_model_case_and_sample_and_a_rerun_is_cached(tmp_path):
    result = fxtr.run(evaluate, _inputs(includes()), store=tmp_path / "s")
    assert result.status == "succeeded"
    assert result.output.dims == ("model", "case", "sample")
    assert list(result.output.keys("sample")) == [0]  # present even with one sample
    expected = {
        ("mock/kit-small", "c0", 0): 1.0,
        ("mock/kit-small", "c1", 0): 0.0,
        ("mock/kit-small", "c2", 0): 0.0,
        ("mock/kit-large", "c0", 0): 1.0,
        ("mock/kit-large", "c1", 0): 1.0,
        ("mock/kit-large", "c2", 0): 1.0,
    }
    assert _values(result) == expected
    assert all(isinstance(s, Score) for _, s in result.output.items())
    assert result.output[("mock/kit-large", "c2", 0)].answer == "William Shakespeare"
    steps = {i.step for i in result.invocations}
    assert steps == {"fxtr.generate", "fxtr.score"}
    assert any(
        'generate[model="mock/kit-small",case=c0,sample=0]' in i.address for i in result.invocations
    )
    assert sorted(CALLS) == ["large"] * 3 + ["small"] * 3
    CALLS.clear()
    again = fxtr.run(evaluate, _inputs(includes()), store=tmp_path / "s")
    assert again.status == "succeeded" and _values(again) == expected
    assert all(i.from_cache for i in again.invocations) and CALLS == []


def test_another_scorer_regrades_the_cached_answers_without_calling_the_models(tmp_path):
    fxtr.run(evaluate, _inputs(includes()), store=tmp_path / "s")
    CALLS.clear()
    # a different scorer is a different input to the score step: a conflict under review
    reviewed = fxtr.run(evaluate, _inputs(exact()), store=tmp_path / "s")
    assert reviewed.status == "needs_review" and CALLS == []
    redone = fxtr.run(evaluate, _inputs(exact()), store=tmp_path / "s", conflict="overwrite")
    assert redone.status == "succeeded" and CALLS == []
    assert redone.output[("mock/kit-large", "c1", 0)].value == 1.0  # "four" == "four"
    assert redone.output[("mock/kit-large", "c0", 0)].value == 0.0  # "It is Paris." != "Paris"


def _seeded(request: ModelRequest) -> str:
    # a model that knows the answer on even samples only
    return "Paris" if request.sampling.seed % 2 == 0 else "Lyon"


FLAKY = register_mock("kit-flaky", _seeded)


def test_samples_are_seeded_by_index_and_topped_up(tmp_path):
    cases = CASES[:1]
    result = fxtr.run(evaluate, _inputs(includes(), 4, cases, (FLAKY,)), store=tmp_path / "s")
    assert result.status == "succeeded"
    assert [result.output[("mock/kit-flaky", "c0", i)].value for i in range(4)] == [
        1.0,
        0.0,
        1.0,
        0.0,
    ]
    more = fxtr.run(evaluate, _inputs(includes(), 6, cases, (FLAKY,)), store=tmp_path / "s")
    ran = sorted(i.address for i in more.invocations if not i.from_cache)
    assert len(ran) == 4 and all(re.search(r"sample=[45]\]", a) for a in ran)  # 2 samples x 2 steps
    assert [more.output[("mock/kit-flaky", "c0", i)].value for i in range(6)] == [1.0, 0.0] * 3


def test_numeric_and_choice_scorers_in_a_job(tmp_path):
    numbers = [Case(id="n", input="How many legs has a spider?", target="8")]
    mc = [Case(id="m", input="Capital of Italy?", target="B", choices=("Paris", "Rome", "Oslo"))]
    prompts: list[str] = []

    def reply(request):
        prompts.append(_question(request))
        return "ANSWER: B" if "ANSWER" in _question(request) else "A spider has 8.0 legs."

    model = register_mock("kit-mc", reply)
    result = fxtr.run(evaluate, _inputs(numeric(), 1, numbers, (model,)), store=tmp_path / "s")
    assert result.output[("mock/kit-mc", "n", 0)].value == 1.0
    result = fxtr.run(evaluate, _inputs(choice(), 1, mc, (model,)), store=tmp_path / "s")
    assert result.output[("mock/kit-mc", "m", 0)] == Score(
        value=1.0, answer="B", explanation="ANSWER: B"
    )
    assert prompts[-1].endswith("Capital of Italy?\n\nA) Paris\nB) Rome\nC) Oslo")
    assert "'ANSWER: $LETTER'" in prompts[-1] and "one of A,B,C." in prompts[-1]


def test_a_scorer_that_needs_a_target_fails_the_cell_with_the_fix(tmp_path):
    cases = [Case(id="open", input="What is the capital of France?")]
    result = fxtr.run(evaluate, _inputs(includes(), 1, cases, (SMALL,)), store=tmp_path / "s")
    assert result.status == "failed"
    (failed,) = [i for i in result.invocations if i.status == "failed"]
    assert failed.step == "fxtr.score" and "case 'open' has none" in failed.error


def test_an_unregistered_mock_fails_its_cells_naming_register_mock(tmp_path):
    result = fxtr.run(
        evaluate,
        _inputs(includes(), 1, CASES[:1], (Model("mock/kit-unknown"),)),
        store=tmp_path / "s",
    )
    assert result.status == "failed"
    (failed,) = [i for i in result.invocations if i.status == "failed"]
    assert "register_mock('kit-unknown', reply)" in failed.error


# --- judges -----------------------------------------------------------------------------

JUDGED: list[str] = []


def _judge(request: ModelRequest) -> str:
    prompt = _question(request)
    JUDGED.append(prompt)
    expert = re.search(r"\[(?:Expert|Criterion|Wanted)\]: (.*)", prompt)
    submission = re.search(r"\[(?:Submission|Answer)\]: (.*)", prompt)
    ok = expert and submission and expert.group(1).lower()[:4] in submission.group(1).lower()
    return f"Reasoning about {expert.group(1) if expert else '?'}.\nGRADE: {'C' if ok else 'I'}"


JUDGE = register_mock("kit-judge", _judge)


def test_model_graded_fact_keeps_the_raw_reply_and_the_inspect_prompt(tmp_path):
    JUDGED.clear()
    result = fxtr.run(evaluate, _inputs(model_graded_fact(JUDGE)), store=tmp_path / "s")
    assert result.status == "succeeded"
    score = result.output[("mock/kit-large", "c2", 0)]
    assert score.value == 1.0 and score.answer == "William Shakespeare"
    assert score.explanation == "Reasoning about Shakespeare.\nGRADE: C"
    assert result.output[("mock/kit-small", "c2", 0)].value == 0.0
    expected_prompt = DEFAULT_MODEL_GRADED_FACT_TEMPLATE.format(
        question="Who wrote Hamlet?",
        criterion="Shakespeare",
        answer="William Shakespeare",
        instructions=default_instructions(False),
    )
    assert expected_prompt in JUDGED
    assert len(JUDGED) == 6


def test_judge_calls_are_recorded_with_the_judge_role(tmp_path):
    from fxtr.tracing import _recorder

    if getattr(_recorder, "call_role", None) is None:
        pytest.skip("fxtr.tracing._recorder.call_role (CAPTURE stream) is not there yet")
    result = fxtr.run(
        evaluate, _inputs(model_graded_qa(JUDGE), 1, CASES[:1], (SMALL,)), store=tmp_path / "s"
    )
    roles = {i.step: [c.get("role") for c in i.model_calls] for i in result.invocations}
    assert roles == {"fxtr.generate": ["subject"], "fxtr.score": ["judge"]}


def test_a_judge_template_edit_goes_through_review_and_overwrite_reruns_only_the_judge(tmp_path):
    store = tmp_path / "s"
    first = fxtr.run(evaluate, _inputs(model_graded_fact(JUDGE)), store=store)
    assert first.status == "succeeded"
    JUDGED.clear()
    CALLS.clear()
    edited = model_graded_fact(JUDGE, template=DEFAULT_MODEL_GRADED_FACT_TEMPLATE + "\nBe strict.")
    reviewed = fxtr.run(evaluate, _inputs(edited), store=store)
    assert reviewed.status == "needs_review" and JUDGED == [] and CALLS == []
    in_review = [i for i in reviewed.invocations if i.status == "needs_review"]
    assert len(in_review) == 6 and {i.step for i in in_review} == {"fxtr.score"}
    assert all(i.conflict and "scorer" in json.dumps(i.conflict) for i in in_review)
    assert all(i.from_cache for i in reviewed.invocations if i.step == "fxtr.generate")
    redone = fxtr.run(evaluate, _inputs(edited), store=store, conflict="overwrite")
    assert redone.status == "succeeded" and CALLS == [] and len(JUDGED) == 6
    assert all(p.endswith("Be strict.") for p in JUDGED)
    # the same edit again is now cached: nothing is asked twice
    JUDGED.clear()
    assert fxtr.run(evaluate, _inputs(edited), store=store).status == "succeeded" and JUDGED == []


def test_instructions_and_grade_pattern_are_inputs_too():
    base = model_graded_qa(JUDGE)
    assert model_graded_qa(JUDGE, instructions="Say GRADE: C or GRADE: I.") != base
    assert model_graded_qa(JUDGE, grade_pattern=r"VERDICT: ([CI])") != base
    assert model_graded_qa(Model("mock/other")) != base
    assert base.template and base.instructions and base.grade_pattern  # pinned, not None


def test_a_judge_without_a_grade_fails_the_cell_with_its_reply(tmp_path):
    mute = register_mock("kit-mute-judge", "I would rather not say.")
    result = fxtr.run(
        evaluate, _inputs(model_graded_qa(mute), 1, CASES[:1], (SMALL,)), store=tmp_path / "s"
    )
    assert result.status == "failed"
    (failed,) = [i for i in result.invocations if i.status == "failed"]
    assert "gave no grade (C/I)" in failed.error and "I would rather not say." in failed.error


def test_a_fixed_broken_line_keeps_every_computed_result(tmp_path):
    data = tmp_path / "qa.jsonl"
    good = [json.dumps({"input": r["input"], "target": r["target"]}) for r in CAPITALS]
    _write(data, "\n".join([good[0], '{"input": "What is 2 + 2?", "target": "4"', good[2]]))
    with pytest.raises(CaseFileError, match=r"qa\.jsonl:2: "):
        load_cases(data)
    _write(data, "\n".join(good[::2]))  # run without the broken case
    first = fxtr.run(evaluate, _inputs(includes(), 1, load_cases(data)), store=tmp_path / "s")
    assert first.status == "succeeded"
    CALLS.clear()
    _write(data, "\n".join(good))  # the line fixed
    fixed = fxtr.run(evaluate, _inputs(includes(), 1, load_cases(data)), store=tmp_path / "s")
    assert fixed.status == "succeeded"
    ran = [i.address for i in fixed.invocations if not i.from_cache]
    assert len(ran) == 4 and all("what-is-2-2" in a for a in ran)  # 2 models x (generate, score)
    assert sorted(CALLS) == ["large", "small"]


# --- real providers at the network boundary ---------------------------------------------


def test_openai_and_anthropic_models_call_their_apis(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-000000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-000000")
    openai_body = {
        "id": "r",
        "object": "response",
        "status": "completed",
        "model": "gpt-5-mini",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Paris.", "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": 12,
            "output_tokens": 2,
            "input_tokens_details": {"cached_tokens": 0},
        },
    }
    anthropic_body = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": "Lyon."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 12, "output_tokens": 2},
    }
    models = (
        Model("openai/gpt-5-mini", system="Answer in one word."),
        Model("anthropic/claude-haiku-4-5"),
    )
    with respx.mock(assert_all_called=True) as mock:
        oa = mock.post("https://api.openai.com/v1/responses").respond(200, json=openai_body)
        an = mock.post("https://api.anthropic.com/v1/messages").respond(200, json=anthropic_body)
        result = fxtr.run(evaluate, _inputs(includes(), 1, CASES[:1], models), store=tmp_path / "s")
    assert result.status == "succeeded"
    assert _values(result) == {
        ("openai/gpt-5-mini", "c0", 0): 1.0,
        ("anthropic/claude-haiku-4-5", "c0", 0): 0.0,
    }
    sent = json.loads(oa.calls[0].request.content)
    assert sent["model"] == "gpt-5-mini" and "Answer in one word." in json.dumps(sent)
    assert json.loads(an.calls[0].request.content)["model"] == "claude-haiku-4-5"
    record = json.dumps([i.model_calls for i in result.invocations])
    assert "sk-test-openai" not in record and "sk-ant-test" not in record


def test_a_provider_outage_fails_the_cell_with_its_reason_and_resume_reruns_it(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-000000")
    model = Model("openai-compatible/gpt-5-mini", base_url="http://llm.test/v1")
    body = {
        "id": "c",
        "object": "chat.completion",
        "model": "gpt-5-mini",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Paris", "refusal": None},
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
    with respx.mock() as mock:
        mock.post("http://llm.test/v1/chat/completions").respond(
            401, json={"error": {"message": "bad key"}}
        )
        result = fxtr.run(
            evaluate, _inputs(includes(), 1, CASES[:1], (model,)), store=tmp_path / "s"
        )
    assert result.status == "failed"
    (failed,) = [i for i in result.invocations if i.status == "failed"]
    assert failed.step == "fxtr.generate" and failed.reason is not None
    with respx.mock() as mock:
        mock.post("http://llm.test/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=body)
        )
        resumed = fxtr.run(
            evaluate, _inputs(includes(), 1, CASES[:1], (model,)), store=tmp_path / "s"
        )
    assert resumed.status == "succeeded", [(i.status, i.error) for i in resumed.invocations]
    assert _values(resumed) == {("openai-compatible/gpt-5-mini", "c0", 0): 1.0}


def test_a_target_edit_regrades_the_cached_answers_without_asking_again(tmp_path):
    store = tmp_path / "s"
    assert fxtr.run(evaluate, _inputs(includes()), store=store).status == "succeeded"
    CALLS.clear()
    edited = [CASES[0], CASES[1], Case(id="c2", input=CASES[2].input, target="Marlowe")]
    reviewed = fxtr.run(evaluate, _inputs(includes(), 1, edited), store=store)
    assert reviewed.status == "needs_review" and CALLS == []
    in_review = {i.address for i in reviewed.invocations if i.status == "needs_review"}
    assert len(in_review) == 2 and all("score[" in a and "case=c2" in a for a in in_review)
    redone = fxtr.run(evaluate, _inputs(includes(), 1, edited), store=store, conflict="overwrite")
    assert CALLS == [] and redone.output[("mock/kit-large", "c2", 0)].value == 0.0


def test_a_mock_name_belongs_to_one_module():
    again = register_mock("kit-small", _small)  # the same module again: replaces, same model
    assert again == SMALL
    other = {"__file__": "/elsewhere/evals/test_other.py", "__name__": "test_other"}
    code = "from fxtr.evals import register_mock\nregister_mock('kit-small', 'Hi.')"
    with pytest.raises(ValueError, match=r"mock/kit-small is already registered by tests\.test_kit: .* test_other must give"):
        exec(code, other)
    assert Model("mock/kit-small").api().model_name == "kit-small"
