"""Steps: where the expensive, nondeterministic work happens."""

from fxtr.experiment._context import StepContext
from fxtr.experiment._definition import StepDefinition, step

__all__ = ["StepContext", "StepDefinition", "step"]
