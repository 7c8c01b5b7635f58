"""The eval kit: cases, models, scorers, and the ``evaluate`` workflow built from them.

```python
from fxtr.evals import Model, evaluate, includes, load_cases
```

Everything here is made of the same workflows, steps and entities users write, so a kit eval
is cached, resumed, graphed and gated like any other.
"""

from fxtr.evals._cases import Case, CaseFileError, content_id, load_cases
from fxtr.evals._evaluate import case_prompt, evaluate, generate, score
from fxtr.evals._judge import (
    DEFAULT_GRADE_PATTERN,
    DEFAULT_MODEL_GRADED_FACT_TEMPLATE,
    DEFAULT_MODEL_GRADED_QA_TEMPLATE,
    default_instructions,
)
from fxtr.evals._models import Model, mock_judge, register_mock, user_text
from fxtr.evals._scorers import (
    AuditedScorer,
    Score,
    Scorer,
    choice,
    exact,
    f1,
    includes,
    match,
    model_graded_fact,
    model_graded_qa,
    numeric,
    pairwise,
    pattern,
)

__all__ = [
    "AuditedScorer",
    "DEFAULT_GRADE_PATTERN",
    "DEFAULT_MODEL_GRADED_FACT_TEMPLATE",
    "DEFAULT_MODEL_GRADED_QA_TEMPLATE",
    "Case",
    "CaseFileError",
    "Model",
    "Score",
    "Scorer",
    "case_prompt",
    "choice",
    "content_id",
    "default_instructions",
    "evaluate",
    "exact",
    "f1",
    "generate",
    "includes",
    "load_cases",
    "match",
    "mock_judge",
    "model_graded_fact",
    "model_graded_qa",
    "numeric",
    "pairwise",
    "pattern",
    "register_mock",
    "score",
    "user_text",
]
