"""The execution graph: nodes for tasks, steps and model calls, and failure reasons."""

from fxtr.tracing._classify import REASONS, classify, failure_category

__all__ = ["REASONS", "classify", "failure_category"]
