"""``nnx_lab.data_splits`` (§2.16): split manifests planned by id and replayed by id."""

from .data import SPLITS, STRATEGIES, SplitError, SplitManifest, plan_split

__all__ = ["SPLITS", "STRATEGIES", "SplitError", "SplitManifest", "plan_split"]
