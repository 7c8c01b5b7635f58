"""The experiment engine: workflows that schedule, steps that run, arrays and jobs."""

from fxtr.experiment.arrays import Array
from fxtr.experiment.entities import BoundID, Entity
from fxtr.experiment.errors import (
    CacheConflictError,
    DeterminismError,
    FxtrError,
    SignatureError,
    UpstreamFailedError,
)
from fxtr.experiment.handles import ArrayHandle, ScalarHandle
from fxtr.experiment.jobs import Invocation, JobResult, launch, resume, run
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow

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
    "launch",
    "resume",
    "run",
    "step",
    "workflow",
]
