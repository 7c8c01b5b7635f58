"""What a dry run forecasts for each kit step it plans, and the history it reads (DESIGN §14).

A forecaster takes a step's inputs, forecasts the model calls its invocation would make
(tokens and dollars) and returns a placeholder result of the right type, so the invocations
after it are planned too. Placeholders carry numbers, never text of their size: an answer
forecast at N output tokens is an empty text whose usage says N, and the judge that grades
it counts 4 N characters more in its prompt (arithmetic, so a ``max_tokens`` of 10^12 costs
nothing to plan).

History is the store's cache: per step and model, the median cost and tokens of a call;
per model, the median output of a call; per agent model, the median count of each step of
a trajectory (its turns, tool calls, simulated-user turns).
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections.abc import Callable
from typing import Any

DRY_MARK = "fxtr dry run: not executed"
"""The error of an invocation the dry run did not execute (and of what it skipped)."""

PLACEHOLDER = ""
"""The text of a forecast answer: its length is in its usage, not in its text."""

DRY_STOP = "fxtr-dry-run"
"""The ``stop_reason`` of a placeholder response."""

TURN = "fxtr.agents.turn"
AGENT_STEPS = (TURN, "fxtr.agents.tool", "fxtr.agents.user")
"""The steps of a trajectory whose count varies with what the model does."""


class NotExecuted(Exception):
    """Raised in place of a step body that a dry run does not run."""


@dataclasses.dataclass
class Call:
    """One model call an invocation would make."""

    model: str
    role: str
    usd: float | None
    input_tokens: float = 0
    output_tokens: float = 0
    history_name: str = ""
    """The model's name in the store's usage (the provider's name of the model)."""
    assumed: bool = False
    """Its output tokens are the default guess (no ``max_tokens``, no history of the model)."""


def _median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


class History:
    """What the store's cache says each step and model cost, per invocation."""

    def __init__(self, store: Any) -> None:
        self.cost: dict[tuple[str, str], list[float]] = {}
        self.tokens: dict[tuple[str, str], list[tuple[float, float]]] = {}
        self.outputs: dict[str, list[float]] = {}
        self.steps: dict[str, list[tuple[float | None, int, str, str]]] = {}
        self.trajectories: dict[str, dict[str, int]] = {}
        """Per trajectory address: how many invocations of each agent step it has."""
        self.agent_model: dict[str, str] = {}
        """Per trajectory address: the model of its turns."""
        self.turn_sums: dict[str, list[float | None]] = {}
        """Per trajectory address: dollars (``None``: unpriced), input and output tokens of
        its turns."""
        try:
            for address, entry in store.iter_entries():
                if entry.damaged:
                    continue
                step = entry.meta.get("step")
                if step in AGENT_STEPS:
                    self._trajectory(address, step, entry.usage)
                if entry.usage:
                    self._add(step, entry.usage)
        except Exception:  # a store that cannot list its entries has no history to offer
            return

    def _trajectory(self, address: str, step: str, usage: dict[str, Any] | None) -> None:
        where = address.rpartition("/")[0]
        counts = self.trajectories.setdefault(where, dict.fromkeys(AGENT_STEPS, 0))
        counts[step] += 1
        if step == TURN and usage:
            sums = self.turn_sums.setdefault(where, [0.0, 0.0, 0.0])
            for model, row in (usage.get("by_model") or {}).items():
                self.agent_model[where] = model
                usd = row.get("usd")
                sums[0] = None if usd is None or sums[0] is None else sums[0] + float(usd)
                sums[1] = (sums[1] or 0.0) + float(row.get("input_tokens") or 0)
                sums[2] = (sums[2] or 0.0) + float(row.get("output_tokens") or 0)

    def _add(self, step: Any, usage: dict[str, Any]) -> None:
        if not isinstance(step, str):
            return
        roles = usage.get("by_role") or {}
        role = next(iter(roles), "subject") if len(roles) == 1 else "subject"
        for model, row in (usage.get("by_model") or {}).items():
            calls = int(row.get("calls") or 0)
            if not calls:
                continue
            if row.get("usd") is not None:
                self.cost.setdefault((step, model), []).append(float(row["usd"]) / calls)
            tokens_in = float(row.get("input_tokens") or 0) / calls
            tokens_out = float(row.get("output_tokens") or 0) / calls
            self.tokens.setdefault((step, model), []).append((tokens_in, tokens_out))
            self.outputs.setdefault(model, []).append(tokens_out)
            self.steps.setdefault(step, []).append((row.get("usd"), calls, model, role))

    def median_cost(self, step: str, model: str) -> float | None:
        """The median dollars of one call of ``step`` to ``model`` in the store."""
        return _median(self.cost.get((step, model)))

    def median_tokens(self, step: str, model: str) -> tuple[float, float] | None:
        """The median (input, output) tokens of one call of ``step`` to ``model``."""
        seen = self.tokens.get((step, model))
        if not seen:
            return None
        return statistics.median(i for i, _ in seen), statistics.median(o for _, o in seen)

    def median_output(self, model: str) -> float | None:
        """The median output tokens of a call to ``model``, whatever the step."""
        return _median(self.outputs.get(model))

    def median_outputs(self) -> dict[str, float]:
        """Per model, the median output tokens of a call to it, whatever the step."""
        return {model: statistics.median(seen) for model, seen in self.outputs.items() if seen}

    def median_steps(self, model: str) -> dict[str, float] | None:
        """Per agent step, the median count in a trajectory of ``model`` (``None``: unknown)."""
        seen = [c for where, c in self.trajectories.items() if self.agent_model.get(where) == model]
        if not seen:
            return None
        return {step: statistics.median(c[step] for c in seen) for step in AGENT_STEPS}

    def turn(self, model: str, name: str) -> Call | None:
        """The average turn of a typical trajectory of ``model`` (``None``: no history).

        Per trajectory, its turns' dollars and tokens over its turns; the median of those over
        the model's trajectories. (The median turn would undercount: an agent's few long
        answers are outnumbered by its short tool calls.)
        """
        per = []
        for where, sums in self.turn_sums.items():
            turns = self.trajectories[where][TURN]
            if self.agent_model.get(where) == model and turns:
                per.append([None if s is None else s / turns for s in sums])
        if not per:
            return None
        prices = [p[0] for p in per if p[0] is not None]
        usd = statistics.median(prices) if len(prices) == len(per) else None
        tokens_in = statistics.median(p[1] or 0.0 for p in per)
        tokens_out = statistics.median(p[2] or 0.0 for p in per)
        return Call(name, "subject", usd, tokens_in, tokens_out, history_name=model)

    def call(self, step: str, model: str, name: str, role: str) -> Call | None:
        """A typical call of ``step`` to ``model`` from history (``None``: it has none)."""
        tokens = self.median_tokens(step, model)
        if tokens is None:
            return None
        return Call(name, role, self.median_cost(step, model), *tokens, history_name=model)

    def of_step(self, step: str) -> list[Call]:
        """The calls a typical invocation of ``step`` made, per model (its medians)."""
        rows = self.steps.get(step)
        if not rows:
            return []
        out: list[Call] = []
        for model, role in dict.fromkeys((m, r) for _, _, m, r in rows):
            calls = statistics.median(c for _, c, m, _ in rows if m == model)
            typical = self.call(step, model, model, role)
            assert typical is not None  # every row of steps has its tokens
            out.extend(dataclasses.replace(typical) for _ in range(round(calls)))
        return out


Forecaster = Callable[[dict[str, Any], Any, History], tuple[list[Call], Any]]
"""``(kwargs, context, history) -> (calls, placeholder result)`` for a step a dry run plans."""

FORECASTERS: dict[str, Forecaster] = {}
"""Per step name, how a dry run forecasts an invocation of it without running it."""


def call_for(
    step: str, model: Any, request: Any, role: str, history: History, extra_chars: int = 0
) -> Call:
    """The forecast of one call of ``step`` to ``model`` sending ``request``.

    ``extra_chars`` are characters the request would hold beyond its text (a forecast answer
    the prompt quotes).
    """
    from fxtr.evals._models import pricing_api
    from fxtr.models._budget import estimate_call

    known = history.call(step, model.model, model.name, role)
    if known is not None and known.usd is not None:
        return known
    api = pricing_api(model)
    tokens_in, tokens_out, usd = estimate_call(
        api, request, history.median_output(model.model), extra_chars
    )
    if usd is not None:
        from fxtr.models import _batch

        if _batch.settings_for(model.name, model.base_url, model.provider) is not None:
            usd *= _batch.BATCH_PRICE  # its calls go through the provider's batch API
    if known is not None:  # an unpriced model's history: its tokens, still no dollars
        return known
    capped = request.sampling is not None and bool(request.sampling.max_tokens)
    assumed = not capped and history.median_output(model.model) is None
    return Call(
        model.name, role, usd, tokens_in, tokens_out, history_name=model.model, assumed=assumed
    )


def placeholder_response(call: Call, model: Any, output: tuple[Any, ...] = ()) -> Any:
    """A forecast answer: no text, the forecast tokens and cost in its usage."""
    from fxtr.models import ContentText, ModelResponse, Usage

    return ModelResponse(
        output=output or (ContentText(text=PLACEHOLDER),),
        usage=Usage(input_tokens=round(call.input_tokens), output_tokens=round(call.output_tokens)),
        cost=call.usd,
        stop_reason=DRY_STOP,
        model=model.model,
    )


def _answer(response: Any) -> tuple[str, int]:
    """An answer's text for a judge's prompt, and the characters it stands for beyond it."""
    if getattr(response, "stop_reason", None) == DRY_STOP:
        return PLACEHOLDER, 4 * response.usage.output_tokens
    return response.text, 0


# --------------------------------------------------------------------------- the kit's steps


def _generate(kwargs: dict[str, Any], context: Any, history: History) -> tuple[list[Call], Any]:
    from fxtr.evals._evaluate import case_prompt, request_for

    model, case = kwargs["model"], kwargs["case"]
    request = request_for(model, case_prompt(case), context.sample)
    call = call_for(context.step_name, model, request, "subject", history)
    return [call], placeholder_response(call, model)


def _judge_call(
    step: str,
    scorer: Any,
    case: Any,
    values: dict[str, str],
    judge_sample: int | None,
    history: History,
    extra_chars: int,
) -> Call:
    """The judge's call for ``values`` (its template filled as ``ask_judge`` fills it)."""
    from fxtr.evals import _judge
    from fxtr.evals._evaluate import request_for

    try:
        prompt = _judge.fill(
            scorer.template or "",
            values=values,
            instructions=scorer.instructions or "",
            metadata=case.metadata,
        )
    except (KeyError, IndexError, ValueError):
        prompt = "".join(values.values())
    request = request_for(scorer.judge, prompt, judge_sample)
    return call_for(step, scorer.judge, request, "judge", history, extra_chars)


def _is_judge(scorer: Any, case: Any) -> bool:
    from fxtr.evals._scorers import JUDGES

    return scorer.kind in JUDGES and scorer.judge is not None and bool(case.targets)


def _score(kwargs: dict[str, Any], context: Any, history: History) -> tuple[list[Call], Any]:
    from fxtr.evals._scorers import Score

    scorer, case = kwargs["scorer"], kwargs["case"]
    placeholder = Score(value=0.0, answer=None, explanation=DRY_MARK)
    if not _is_judge(scorer, case):
        return [], placeholder
    text, extra = _answer(kwargs["response"])
    values = {"question": case.input, "answer": text, "criterion": "".join(case.targets)}
    return [_judge_call(context.step_name, scorer, case, values, None, history, extra)], placeholder


def _judge_samples(
    kwargs: dict[str, Any], context: Any, history: History
) -> tuple[list[Call], Any]:
    scorer, case = kwargs["scorer"], kwargs["case"]
    gold = "response" not in kwargs
    text, extra = (
        (str(case.metadata.get("completion", "")), 0) if gold else _answer(kwargs["response"])
    )
    placeholder = {"value": 0.0, "grade": None, "reply": DRY_MARK, "answer": None, "label": 0}
    if not _is_judge(scorer, case):
        return [], placeholder
    values = {"question": case.input, "answer": text, "criterion": "".join(case.targets)}
    sample = kwargs["judge_sample"]
    return [_judge_call(context.step_name, scorer, case, values, sample, history, extra)], (
        placeholder
    )


def _pairwise(kwargs: dict[str, Any], context: Any, history: History) -> tuple[list[Call], Any]:
    scorer, case = kwargs["scorer"], kwargs["case"]
    mine, extra_mine = _answer(kwargs["response"])
    other, extra_other = _answer(kwargs["other"])
    first, second = (mine, other) if kwargs["order"] == "AB" else (other, mine)
    criterion = "".join(case.targets) or "the answer that is more correct, complete and helpful"
    values = {"question": case.input, "answer_a": first, "answer_b": second, "criterion": criterion}
    placeholder = {"value": 0.5, "grade": "TIE", "reply": DRY_MARK}
    if scorer.judge is None:
        return [], placeholder
    call = _judge_call(
        context.step_name,
        scorer,
        case,
        values,
        kwargs["judge_sample"],
        history,
        extra_mine + extra_other,
    )
    return [call], placeholder


def _no_call_score(
    kwargs: dict[str, Any], context: Any, history: History
) -> tuple[list[Call], Any]:
    """A step that calls no model and returns a score (a vote, a pair's verdict)."""
    from fxtr.evals._scorers import Score

    return [], Score(value=0.0, answer=None, explanation=DRY_MARK)


FORECASTERS["fxtr.generate"] = _generate
FORECASTERS["fxtr.score"] = _score
FORECASTERS["fxtr.judge"] = _judge_samples
FORECASTERS["fxtr.judge_gold"] = _judge_samples
FORECASTERS["fxtr.pairwise"] = _pairwise
FORECASTERS["fxtr.judge_vote"] = _no_call_score
FORECASTERS["fxtr.pairwise_verdict"] = _no_call_score


# --------------------------------------------------------------------------- agents


def _turn(kwargs: dict[str, Any], context: Any, history: History) -> tuple[list[Call], Any]:
    """A model turn: forecast, then a reply that ends the trajectory (submit, or an answer).

    The turns after it depend on what the model does: ``_tally`` adds them from the median
    turns of the model's trajectories in history, or reports the trajectory as "at least".
    """
    from fxtr.agents._types import Turn
    from fxtr.models import ToolCall

    model, request = kwargs["model"], kwargs["request"]
    call = history.turn(model.model, model.name)
    if call is None or call.usd is None:
        call = call_for(TURN, model, request, "subject", history)
    output: tuple[Any, ...] = ()
    if any(spec.name == "submit" for spec in request.tools):
        output = (ToolCall(id="dry", name="submit", arguments={"answer": PLACEHOLDER}),)
    return [call], Turn(response=placeholder_response(call, model, output))


_STOP = re.compile(r"generate '(.+?)' as a standalone message")


def _user(kwargs: dict[str, Any], context: Any, history: History) -> tuple[list[Call], Any]:
    """The simulated user's reply: forecast, then its stop word (the conversation ends)."""
    from fxtr.agents._types import Turn
    from fxtr.models import ContentText

    model, request = kwargs["model"], kwargs["request"]
    call = call_for("fxtr.agents.user", model, request, "user_sim", history)
    system = request.context[0].content[0].text if request.context else ""
    found = _STOP.search(system)
    if found is None:
        raise NotExecuted(DRY_MARK)
    output = (ContentText(text=found.group(1)),)
    return [call], Turn(response=placeholder_response(call, model, output))


def _env(kwargs: dict[str, Any], context: Any, history: History) -> tuple[list[Call], Any]:
    """The initial environment: not built (its function is yours), no model call."""
    from fxtr.agents._types import Environment

    return [], Environment(state=None)


def _trajectory(kwargs: dict[str, Any], context: Any, history: History) -> tuple[list[Call], Any]:
    return [], kwargs["trajectory"]


def _agent_score(kwargs: dict[str, Any], context: Any, history: History) -> tuple[list[Call], Any]:
    """A trajectory's grade: a judge's call for a judge, none for the other scorers."""
    from fxtr.evals._scorers import Score

    scorer, case, trajectory = kwargs["scorer"], kwargs["case"], kwargs["trajectory"]
    placeholder = Score(value=0.0, answer=None, explanation=DRY_MARK)
    if not _is_judge(scorer, case) or not hasattr(trajectory, "usage"):
        return [], placeholder
    extra = 0
    if trajectory.text == PLACEHOLDER and trajectory.turns:  # the answer of the forecast turn
        extra = 4 * trajectory.usage.output_tokens // trajectory.turns
    values = {"question": case.input, "answer": trajectory.text, "criterion": "".join(case.targets)}
    return [_judge_call(context.step_name, scorer, case, values, None, history, extra)], (
        placeholder
    )


FORECASTERS[TURN] = _turn
FORECASTERS["fxtr.agents.user"] = _user
FORECASTERS["fxtr.agents.env"] = _env
FORECASTERS["fxtr.agents.trajectory"] = _trajectory
FORECASTERS["fxtr.agents.score"] = _agent_score
