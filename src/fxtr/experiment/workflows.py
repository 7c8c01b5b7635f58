"""Workflows: deterministic functions that schedule steps."""

from fxtr.experiment._context import WorkflowContext
from fxtr.experiment._definition import WorkflowDefinition, workflow

__all__ = ["WorkflowContext", "WorkflowDefinition", "workflow"]
