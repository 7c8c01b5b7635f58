"""Re-export of the failure classifier, which lives in ``fxtr.models._classify``.

Providers use its categories; tracing re-exports it so that ``fxtr.tracing.classify``
stays the public name. A step that fails with the error of a model call recorded inside it
takes that call's reason (``mark_call_failure``, DESIGN §3).
"""

from fxtr.models._classify import (  # noqa: F401
    REASON_OF_CATEGORY,
    REASONS,
    _body_of,
    _status_of,
    category_from_http,
    classify,
    failure_category,
    mark_call_failure,
)
