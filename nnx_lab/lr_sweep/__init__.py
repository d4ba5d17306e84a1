"""The LR finder (§2.9): a learning-rate sweep that leaves no trace.

``lr_finder(net, train_loader, loss_fn=...)`` trains ``num_iter`` steps with the
learning rate rising from ``start_lr`` to ``end_lr`` (exponentially, or linearly), with
the engine's own training step (the optimizer the run would use, the precision policy,
no run directory), and records the loss of each step and its bias-corrected exponential
moving average. The sweep ends early when the smoothed loss rises past the best by a
margin, or when a loss is not finite. Afterwards everything is as it was: the weights
and buffers, each module's own train/eval mode, a given optimizer's state, the loaders'
and samplers' generators, and Python's, NumPy's and torch's random streams, restored
in ``try/finally`` through the engine's ``RngState`` (also when the sweep raises or is
stopped).

Several rules read the curve (slopes are taken against log10 of the learning rate):
``"valley"`` (the default: the point two thirds of the way down the longest valley of
the smoothed curve), ``"min_div_10"`` (the lowest smoothed loss's learning rate over
ten), ``"steepest"`` (the steepest descent), and ``"linear_slope"`` (the steepest
descent against the learning rate itself, for reference). The two slope rules skip the
first tenth of the points (the warm-up, as fastai does) and find no slope (None) rather
than name the edge of the curve. Measured on a 20-class MLP, the last two pick rates
that diverge or do not learn; the first two train well. Every rule is linear in the
points, or n log n, and a Stop after the last step also ends the reading of the curve.
"""

from ._result import LRFinderResult
from ._rules import RULES, suggest, warmup_points
from ._sweep import check_sweep, lr_finder

__all__ = ["RULES", "LRFinderResult", "check_sweep", "lr_finder", "suggest", "warmup_points"]
