"""Executors: where step bodies run.

``LocalExecutor`` is the default; ``fxtr.integrations.dask.DaskExecutor`` runs them on a cluster.
An executor that runs steps elsewhere uses this module (the seam meant for integrations)
rather than the engine's internals:

- on the coordinator: ``invocation_of`` (the record to fill), ``keep_entities`` (entities a
  worker stored), ``source_hash`` (to check the worker runs the same code);
- on the worker: ``recording_into`` (model calls go to the invocation),
  ``limiting_model_calls`` (a per-provider limit), ``failure_details`` (a failure as data);
- both: ``encode_value`` / ``decode_value`` / ``fingerprint_of_text``, the canonical text.
"""

from fxtr.experiment._executor import (
    Executor,
    LocalExecutor,
    decode_value,
    encode_value,
    failure_details,
    fingerprint_of_text,
    invocation_of,
    keep_entities,
    limiting_model_calls,
    source_hash,
)
from fxtr.tracing._recorder import recording_into

__all__ = [
    "Executor",
    "LocalExecutor",
    "decode_value",
    "encode_value",
    "failure_details",
    "fingerprint_of_text",
    "invocation_of",
    "keep_entities",
    "limiting_model_calls",
    "recording_into",
    "source_hash",
]
