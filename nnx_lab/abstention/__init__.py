"""Declining uncertain predictions (§2.19): choose a threshold on validation, save it,
apply it to new rows, and read coverage and risk; the risk-coverage curve and its area;
a threshold with a high-probability risk bound (selection with guaranteed risk).

    from nnx_lab.abstention import select_threshold

    selection = select_threshold(val_probabilities, y_val, kind="max_probability",
                                 risk_ceiling=0.05, split_id="val", test_split_id="test")
    policy = selection.require()
"""

from ..errors import AbstentionSchemaError
from ._bound import clopper_pearson_upper
from ._curve import RiskCoverageCurve, risk_coverage_curve
from ._inputs import check_kind, distribution, scores, targets, unique_ids  # noqa: F401 (widgets)
from ._policy import (
    AbstentionError,
    AbstentionPolicy,
    AbstentionReport,
    AbstentionResult,
    ThresholdSelection,
    most_confident_mistakes,
    select_threshold,
)
from ._status import SelectionStatus

__all__ = [
    "AbstentionError",
    "AbstentionPolicy",
    "AbstentionReport",
    "AbstentionResult",
    "AbstentionSchemaError",
    "RiskCoverageCurve",
    "SelectionStatus",
    "ThresholdSelection",
    "clopper_pearson_upper",
    "most_confident_mistakes",
    "risk_coverage_curve",
    "select_threshold",
]
