"""The ``@step`` and ``@workflow`` decorators and the definitions they make."""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
from collections.abc import Awaitable, Callable
from typing import Any, Generic, ParamSpec, TypeVar

from fxtr.experiment._signature import Signature, read_signature

P = ParamSpec("P")
R = TypeVar("R")

_WORKFLOWS: dict[str, WorkflowDefinition[..., Any]] = {}
"""Workflows defined in this process by importable path, so ``resume`` can find them."""


def _normalized_source_hash(fn: Callable[..., Any]) -> str:
    """Hash of the function's syntax tree without docstring and decorators.

    Comments, blank lines, formatting and the Python function name do not change it; any
    change of code does.
    """
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
        node = tree.body[0]
        if isinstance(node, (ast.AsyncFunctionDef, ast.FunctionDef)):
            node.decorator_list = []
            node.name = "_"  # the step's identity is its name=, not the Python name
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
        text = ast.dump(tree, include_attributes=False)
    except (OSError, TypeError, SyntaxError, IndexError):
        code = fn.__code__
        text = repr((code.co_code, code.co_consts, code.co_names))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _check_name(kind: str, name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        msg = (
            f"@{kind} needs a non-empty name=, got {name!r}; for example @{kind}(name='qa.answer')."
        )
        raise TypeError(msg)
    if any(c in name for c in "/[]"):
        msg = f"@{kind} name {name!r} contains '/', '[' or ']', which addresses use; pick another."
        raise ValueError(msg)
    return name


class StepDefinition(Generic[P, R]):
    """A step: an ``async def`` that does work, scheduled with ``context.run_step``."""

    def __init__(
        self,
        fn: Callable[P, Awaitable[R]],
        name: str,
        version: str | int | None,
        timeout: float | None,
        concurrency: int | None,
    ) -> None:
        self.fn = fn
        self.name = name
        self.version = version
        self.timeout = timeout
        self.concurrency = concurrency
        self.signature: Signature = read_signature(fn, "step", name)
        self.path = f"{fn.__module__}:{fn.__qualname__}"
        self._source_hash: str | None = None
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    @property
    def source_hash(self) -> str:
        """Hash of the step's normalized source."""
        if self._source_hash is None:
            self._source_hash = _normalized_source_hash(self.fn)
        return self._source_hash

    @property
    def code_id(self) -> str:
        """What stands for the step's code in its fingerprint.

        Its ``version=`` when one is given (a refactor that keeps the version keeps the cache;
        bumping it says the results change), else its normalized source (code drift).
        """
        return self.source_hash if self.version is None else f"version:{self.version}"

    @property
    def code_counts(self) -> bool:
        """Whether a change of the step's source is a change of its results (no version)."""
        return self.version is None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        msg = (
            f"Step {self.name!r} was called directly. Schedule it from a workflow with "
            f"context.run_step(name, {self.fn.__name__}, inputs) so it is cached and "
            "recorded (the undecorated function is .fn)."
        )
        raise TypeError(msg)

    def __repr__(self) -> str:
        return f"<step {self.name!r} ({self.path})>"


class WorkflowDefinition(Generic[P, R]):
    """A workflow: an ``async def`` that only schedules steps and child workflows."""

    def __init__(self, fn: Callable[P, Awaitable[R]], name: str) -> None:
        self.fn = fn
        self.name = name
        self.signature: Signature = read_signature(fn, "workflow", name)
        self.path = f"{fn.__module__}:{fn.__qualname__}"
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        _WORKFLOWS[self.path] = self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        msg = (
            f"Workflow {self.name!r} was called directly. Launch it with "
            f"fxtr.run({self.fn.__name__}, inputs) or schedule it with "
            "context.run_child_workflow(...)."
        )
        raise TypeError(msg)

    def __repr__(self) -> str:
        return f"<workflow {self.name!r} ({self.path})>"


def _default_name(fn: Any) -> str:
    """A step's or workflow's name when ``name=`` is left out: its module and qualified name.

    ``evals.qa.answer`` for ``answer`` in ``evals/qa.py``; renaming or moving the function
    moves its cache (its addresses and fingerprints change).
    """
    module = getattr(fn, "__module__", None) or "__main__"
    qualname = str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "fn"))
    return f"{module}.{qualname.replace('<locals>.', '')}"


def step(
    _fn: Any = None,
    /,
    *,
    name: str | None = None,
    version: str | int | None = None,
    timeout: float | None = None,
    concurrency: int | None = None,
) -> Callable[[Callable[P, Awaitable[R]]], StepDefinition[P, R]]:
    """Declare a step: the place where expensive or nondeterministic work happens.

    Args:
        name: the step's name, recorded on every invocation (``"qa.answer"``). Left out
            (``@step`` or ``@step()``), it is the function's module and qualified name, so
            renaming or moving the function moves its cache.
        version: stands for the step's code in the fingerprint: a refactor that keeps the
            version keeps the cache, and a new version recomputes on purpose (without
            review). Without it, the step's normalized source is in the fingerprint.
        timeout: seconds one invocation may take before it fails with ``TimeoutError``.
        concurrency: at most this many invocations of this step run at once in a job.

    Raises:
        SignatureError: an annotation is missing or not one fxtr understands.
    """
    if _fn is not None:  # written bare: @step
        return step(name=name, version=version, timeout=timeout, concurrency=concurrency)(_fn)  # type: ignore[return-value]
    if name is not None:
        _check_name("step", name)
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
    ):
        msg = (
            f"@step(name={name!r}) timeout must be a positive number of seconds "
            f"(e.g. timeout=30), got {timeout!r}."
        )
        raise ValueError(msg)
    if concurrency is not None and (not isinstance(concurrency, int) or concurrency < 1):
        msg = f"@step concurrency must be a positive int, got {concurrency!r}."
        raise ValueError(msg)

    def decorate(fn: Callable[P, Awaitable[R]]) -> StepDefinition[P, R]:
        return StepDefinition(
            fn,
            _check_name("step", _default_name(fn) if name is None else name),
            version,
            timeout,
            concurrency,
        )

    return decorate


def workflow(
    _fn: Any = None, /, *, name: str | None = None
) -> Callable[[Callable[P, Awaitable[R]]], WorkflowDefinition[P, R]]:
    """Declare a workflow: a deterministic ``async def`` that schedules steps.

    Args:
        name: the workflow's name; the root of every address under it. Left out, it is the
            function's module and qualified name.

    Raises:
        SignatureError: an annotation is missing or not one fxtr understands.
    """
    if _fn is not None:  # written bare: @workflow
        return workflow(name=name)(_fn)  # type: ignore[return-value]
    if name is not None:
        _check_name("workflow", name)

    def decorate(fn: Callable[P, Awaitable[R]]) -> WorkflowDefinition[P, R]:
        return WorkflowDefinition(
            fn, _check_name("workflow", _default_name(fn) if name is None else name)
        )

    return decorate


def _import_module(module: str, source_file: str | None) -> Any:
    import importlib
    import os

    from fxtr.experiment._origin import load_file, load_script, main_module

    if module == "__main__":  # `python job.py`: the script, loaded without its main block
        if source_file and os.path.exists(source_file):
            return load_script(source_file)
        return main_module()
    try:
        return importlib.import_module(module)
    except ImportError:
        if not source_file or not os.path.exists(source_file):
            raise
    # a module pytest imported from its own folder (evals/test_qa.py as `test_qa`)
    return load_file(module, source_file)


def find_workflow(path: str, source_file: str | None = None) -> WorkflowDefinition[..., Any]:
    """The workflow at an importable path ``module:qualname``.

    Args:
        path: ``module:qualname`` as the record keeps it.
        source_file: the module's file, used when the module is not importable by name
            (pytest imports eval modules from their folder).

    Raises:
        LookupError: it cannot be imported, naming the path.
    """
    found = _WORKFLOWS.get(path)
    if found is not None:
        return found
    module, _, qualname = path.partition(":")
    try:
        obj: Any = _import_module(module, source_file)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        msg = (
            f"The job's root workflow {path!r} can no longer be imported ({exc}). Restore it "
            "under that name, or pass workflow= to resume()."
        )
        raise LookupError(msg) from None
    if not isinstance(obj, WorkflowDefinition):
        msg = f"{path!r} is not a @workflow any more; pass workflow= to resume()."
        raise LookupError(msg)
    return obj
