"""``Model``: a model named ``provider/model``, and the offline ``mock/NAME`` models."""

from __future__ import annotations

import re
import sys
from typing import Any

from fxtr.experiment._entity import Entity
from fxtr.models import (
    AnthropicMessagesAPI,
    MockModelAPI,
    ModelRequest,
    OpenAIChatAPI,
    OpenAIResponsesAPI,
    Sampling,
    UserMessage,
)
from fxtr.models._mock import Reply

PROVIDERS = ("openai", "anthropic", "openai-compatible", "mock")

_MOCKS: dict[str, MockModelAPI] = {}
_OWNERS: dict[str, str] = {}
"""The module that registered each mock name."""


class Model(Entity):
    """A model to call: ``provider/model``, its sampling, system prompt and server.

    ``openai/gpt-5-mini`` (the Responses API), ``anthropic/claude-haiku-4-5`` (Messages),
    ``openai-compatible/NAME`` (Chat Completions at ``base_url``, which includes ``/v1``), and
    ``mock/NAME`` (offline, see ``register_mock``). The name is part of every fingerprint, so
    results of one model are never served for another, and offline answers never for a real
    model.

    ``batch=True`` sends the model's single-turn kit calls (``generate``, judges) through its
    provider's batch API (OpenAI and Anthropic), at most ``batch_size`` requests a batch
    (default 1,000), sent ``batch_delay`` seconds after the first (default 5). How calls
    travel is not part of the model's identity: batched and direct answers share the cache.
    """

    name: str
    sampling: Sampling | None = None
    system: str | None = None
    base_url: str | None = None

    def __init__(
        self,
        name: str,
        *,
        sampling: Sampling | None = None,
        system: str | None = None,
        base_url: str | None = None,
        batch: bool | None = None,
        batch_size: int | None = None,
        batch_delay: float | None = None,
    ) -> None:
        # written out so the name can be positional: Model("openai/gpt-5-mini")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "sampling", sampling)
        object.__setattr__(self, "system", system)
        object.__setattr__(self, "base_url", base_url)
        self._check()
        if batch is not None or batch_size is not None or batch_delay is not None:
            # how calls travel, not what they ask: not a field, so not in any fingerprint
            from fxtr.models._batch import configure

            configure(
                name,
                base_url,
                self.provider,
                batch=batch,
                size=batch_size,
                delay=batch_delay,
            )

    def _check(self) -> None:
        provider, _, model = self.name.partition("/")
        if provider not in PROVIDERS or not model:
            msg = (
                f"Model name {self.name!r} is not 'provider/model': use one of "
                + ", ".join(f"'{p}/...'" for p in PROVIDERS)
                + " (e.g. 'openai/gpt-5-mini', 'anthropic/claude-haiku-4-5', 'mock/small')."
            )
            raise ValueError(msg)
        if provider == "openai-compatible" and not self.base_url:
            msg = (
                f"Model {self.name!r} needs base_url= (the server's URL, including /v1, "
                "e.g. 'http://localhost:8000/v1')."
            )
            raise ValueError(msg)

    def __fxtr_id__(self) -> str:
        """The model's id in pytest node ids and as the key of its cell."""
        return self.name

    @property
    def provider(self) -> str:
        """``openai``, ``anthropic``, ``openai-compatible`` or ``mock``."""
        return self.name.partition("/")[0]

    @property
    def model(self) -> str:
        """The provider's name of the model (what follows the first ``/``)."""
        return self.name.partition("/")[2]

    def api(self) -> Any:
        """The provider's client; close it with ``await api.aclose()``.

        Keys come from the provider's usual environment variable.

        Raises:
            LookupError: a ``mock/NAME`` that no ``register_mock`` call made.
        """
        if self.provider == "openai":
            return OpenAIResponsesAPI(self.model, base_url=self.base_url)
        if self.provider == "anthropic":
            return AnthropicMessagesAPI(self.model, base_url=self.base_url)
        if self.provider == "openai-compatible":
            return OpenAIChatAPI(self.model, base_url=self.base_url)
        mock = _MOCKS.get(self.model)
        if mock is None:
            known = ", ".join(sorted(_MOCKS)) or "none yet"
            msg = (
                f"{self.name!r} is not a registered mock model (registered: {known}). Call "
                f"fxtr.evals.register_mock({self.model!r}, reply) in the eval module, or "
                "name a real model ('openai/gpt-5-mini')."
            )
            raise LookupError(msg)
        return mock


def pricing_api(model: Model) -> Any:
    """What prices ``model``'s calls (its name, provider and server), without opening a client."""
    import types

    if model.provider == "mock":
        return model.api()  # a registered mock: no client behind it
    provider = "anthropic" if model.provider == "anthropic" else "openai"
    return types.SimpleNamespace(model_name=model.model, provider=provider, base_url=model.base_url)


def register_mock(
    name: str, reply: Reply, *, delay: float = 0.0, price_as: str | None = None
) -> Model:
    """Make ``mock/NAME`` answer offline from ``reply``, and return ``Model("mock/NAME")``.

    Args:
        name: ``NAME`` or ``mock/NAME``. A ``NAME`` in the price table (``gpt-5-mini``) is
            priced like that model; ``price_as`` names another one to price it as.
        reply: what ``MockModelAPI`` takes: a string, a list used in turn, or a callable of
            the ``ModelRequest`` returning a string, a ``ModelResponse`` or a
            ``ModelCallFailure``. With ``samples``, ``request.sampling.seed`` is the sample
            index, so a callable can vary its answers by sample, reproducibly.
        delay: seconds each call takes.
        price_as: a priced model name to compute the mock's cost with.

    Register in the eval module (the launcher), so every process that imports it (pytest-xdist
    workers included) has the same mocks. The name is the model's identity, so one process
    has one mock per name: registering it again from the same module replaces its reply
    (a module imported twice); from another module it is an error.

    Raises:
        ValueError: another module registered this name.
    """
    return _register(name, reply, delay, price_as, _owner(sys._getframe(1)))


def _owner(frame: Any) -> str:
    """The registering module's name (a module imported again keeps its name)."""
    return str(frame.f_globals.get("__name__", "?"))


def _register(name: str, reply: Reply, delay: float, price_as: str | None, owner: str) -> Model:
    short = name.removeprefix("mock/")
    before = _OWNERS.get(short)
    if before is not None and before != owner:
        msg = (
            f"mock/{short} is already registered by {before}: a model's name is its identity "
            f"in every fingerprint, so {owner} must give its mock another name "
            f"(register_mock('{short}-2', ..., price_as={short!r}) keeps the price)."
        )
        raise ValueError(msg)
    _OWNERS[short] = owner
    _MOCKS[short] = MockModelAPI(short, reply, delay=delay, price_as=price_as)
    return Model(f"mock/{short}")


def user_text(request: ModelRequest) -> str:
    """The text of a request's last user message (what a mock's reply callable answers)."""
    for message in reversed(request.context):
        if isinstance(message, UserMessage):
            return "".join(block.text for block in message.content)
    return ""


_CRITERION = re.compile(r"^\[(?:Expert|Criterion)\]: (.*?)\n\*{3}", re.MULTILINE | re.DOTALL)
_SUBMISSION = re.compile(r"^\[Submission\]: (.*?)\n\*{3}", re.MULTILINE | re.DOTALL)


def _inclusion_grade(request: ModelRequest) -> str:
    prompt = user_text(request)
    criterion, submission = _CRITERION.search(prompt), _SUBMISSION.search(prompt)
    if criterion is None or submission is None:
        return "The prompt is not a default grading template, so I cannot grade it.\nGRADE: I"
    wanted, given = criterion.group(1).strip(), submission.group(1)
    verdict = "C" if wanted.casefold() in given.casefold() else "I"
    return (
        f"The submission {'contains' if verdict == 'C' else 'lacks'} {wanted!r}.\nGRADE: {verdict}"
    )


def mock_judge(name: str = "judge", *, price_as: str | None = None) -> Model:
    """An offline judge, ``mock/NAME``: GRADE C when the target appears in the answer.

    It reads the default ``model_graded_fact`` and ``model_graded_qa`` templates (casefolded
    inclusion of the expert answer or criterion in the submission) and grades anything else
    I, so it stands in for a real judge in offline evals and tests. ``price_as`` prices its
    calls like a real model's.
    """
    return _register(name, _inclusion_grade, 0.0, price_as, _owner(sys._getframe(1)))
