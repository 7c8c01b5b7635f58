"""Executors: where step bodies run.

``LocalExecutor`` is the default; ``fxtr.integrations.dask.DaskExecutor`` runs them on a cluster.
"""

from fxtr.experiment._executor import Executor, LocalExecutor

__all__ = ["Executor", "LocalExecutor"]
