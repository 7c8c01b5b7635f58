"""Executors: where step bodies run.

``LocalExecutor`` is the default; ``fxtr.integrations.dask.DaskExecutor`` runs them on a cluster.
An executor of its own uses ``source_hash``, ``invocation_of`` and ``keep_entities`` (the seam
meant for integrations) rather than the engine's internals.
"""

from fxtr.experiment._executor import (
    Executor,
    LocalExecutor,
    invocation_of,
    keep_entities,
    source_hash,
)

__all__ = ["Executor", "LocalExecutor", "invocation_of", "keep_entities", "source_hash"]
