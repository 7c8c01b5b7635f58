"""Handles to arrays a job will compute."""

from fxtr.experiment._handle import ArrayHandle, FieldQuery, ScalarHandle

__all__ = ["ArrayHandle", "FieldQuery", "ScalarHandle"]
