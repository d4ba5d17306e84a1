"""What a monitored value is called in words: ``val_edp.error`` is "validation error",
``val_edp.metrics.mae`` "validation MAE". The one place an internal source name
(``MonitorSpec.source``, ``EarlyStopping.selected``) becomes the words a reason shows."""

from __future__ import annotations

__all__ = ["monitor_label"]

_SPLITS = {"val_edp": "validation", "train_edp": "training"}
# Names that read as an acronym or a phrase; any other name is shown as it is, with its
# underscores as spaces.
_WORDS = {
    "mae": "MAE",
    "mse": "MSE",
    "nll": "NLL",
    "ece": "ECE",
    "auroc": "AUROC",
    "f1": "F1",
    "f1_micro": "micro F1",
    "f1_weighted": "weighted F1",
    "precision_micro": "micro precision",
    "recall_micro": "micro recall",
    "hamming_loss": "Hamming loss",
    "brier": "Brier score",
}


def monitor_label(source: str | None) -> str:
    """``"val_edp.error"`` -> ``"validation error"``, ``"val_edp.metrics.mae"`` ->
    ``"validation MAE"``, ``"train_edp.loss"`` -> ``"training loss"``,
    ``"val_edp.metrics.ece(bins=10)"`` -> ``"validation ECE (bins=10)"``. A name of
    another shape is returned as it is; None is the default monitor's "validation error"."""
    if not source:
        return "validation error"
    split, _, rest = source.partition(".")
    where = _SPLITS.get(split)
    if where is None or not rest:
        return source
    name = rest.removeprefix("metrics.")
    base, paren, options = name.partition("(")
    words = _WORDS.get(base, base.replace("_", " "))
    return f"{where} {words}" + (f" ({options}" if paren else "")
