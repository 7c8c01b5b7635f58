"""fxtr: a pytest-integrated evaluation harness for experiments on language models."""

from fxtr.experiment import (
    Array,
    ArrayHandle,
    BoundID,
    CacheConflictError,
    DeterminismError,
    Entity,
    FxtrError,
    Invocation,
    JobResult,
    ScalarHandle,
    SignatureError,
    StepContext,
    UpstreamFailedError,
    WorkflowContext,
    launch,
    resume,
    run,
    step,
    workflow,
)

__version__ = "0.1.0"

__all__ = [
    "Array",
    "ArrayHandle",
    "BoundID",
    "CacheConflictError",
    "DeterminismError",
    "Entity",
    "FxtrError",
    "Invocation",
    "JobResult",
    "ScalarHandle",
    "SignatureError",
    "StepContext",
    "UpstreamFailedError",
    "WorkflowContext",
    "__version__",
    "launch",
    "resume",
    "run",
    "step",
    "workflow",
]
