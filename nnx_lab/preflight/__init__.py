"""A pre-flight check before a long fit (issue 28): ``preflight(model, params)``.

Four quick checks on copies of the network, each a pass or a named problem in one
``PreflightReport``: the data (labels against the classes, class balance, NaN and
infinities), that a gradient reaches every trainable tensor (frozen ones named too),
that one batch can be overfitted (the loss falls by ``factor`` in ``steps`` updates),
and an LR sweep (``nnx_lab.lr_finder``). Nothing is written (no run directory, no file
under the runs root), the model's weights are untouched and the random streams are as
they were. ``ExperimentPlan.preflight()`` runs it on the model ``fit()`` would build.
"""

from ._checks import check_data, check_gradients, check_lr, check_overfit
from ._report import PreflightCheck, PreflightReport
from ._run import preflight

__all__ = [
    "PreflightCheck",
    "PreflightReport",
    "check_data",
    "check_gradients",
    "check_lr",
    "check_overfit",
    "preflight",
]
