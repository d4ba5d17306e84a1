"""The mistakes a model makes: confusion, top losses, residuals (issue 28).

    from nnx_lab.interpretation import interpret

    result = interpret(run, val_loader, split="val", calibrator=cal, policy=policy)
    result.confusion, result.confusion_normalized, result.samples(3, 8), result.top_losses

One streamed pass (``iter_predict``, counted with ``StreamingMetrics``); a run is read
at its BEST checkpoint. The ``Interpretation`` widget draws the result.
"""

from ._compute import interpret
from ._result import InterpretationResult, Mistake

__all__ = ["InterpretationResult", "Mistake", "interpret"]
