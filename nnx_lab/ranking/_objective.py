"""The ranking task's training objective: one term ``"pairwise"`` (see ``_pairwise``)."""

from __future__ import annotations

import re
from typing import Any

import torch

from ..engine.data import first_batch
from ..engine.objective import LossTerm, Objective, ObjectiveContext, ObjectiveResult
from ..engine.training_state import preserved_rng
from ..errors import ConfigError
from ._batches import check_structure, check_values, scores_of
from ._evaluate import check_full
from ._pairwise import pairwise_terms

__all__ = ["PairwiseObjective", "check_request", "check_validation"]

_RANKING_KEY = re.compile(r"^(mrr|recall|ndcg)_at_(\d+)$")


def check_request(task: Any, model: Any, params: Any) -> None:
    """What a ranking run needs, refused before any run directory exists: a scorer of
    one output, batches of four tensors with relevance in range (the first batch of
    each loader), and a ranking monitor at a cutoff the task reports."""
    net_params = getattr(model, "net_params", None)
    width = getattr(net_params, "output_dim", None)
    if isinstance(width, int) and width != 1:
        raise ConfigError(
            "NNParams.output_dim",
            width,
            "a ranking scorer gives one score per (query, candidate) row: pass output_dim=1",
        )
    loader = getattr(params, "train_loader", None)
    if loader is not None:
        where = "NNTrainParams.train_loader"
        batch = check_structure(first_batch(loader, where), f"{where} (first batch)")
        check_values(batch[3], task.max_relevance, f"{where} (first batch)")
    if getattr(params, "val_loader", None) is not None:
        check_validation(task, params.val_loader)
    monitor = getattr(params, "monitor", None)
    metric = getattr(monitor, "metric", None)
    if isinstance(metric, str) and _RANKING_KEY.match(metric) and metric not in task.metric_keys:
        cut = int(_RANKING_KEY.match(metric).group(2))  # type: ignore[union-attr]
        raise ConfigError(
            "NNTrainParams.monitor",
            metric,
            f"the task reports {', '.join(task.metric_keys)}; pass "
            f"RankingTask(k={tuple(sorted({*task.k, cut}))}) to report it",
        )


def check_validation(task: Any, loader: Any) -> None:
    """Every validation batch's structure, its relevance range and (``"full"``) the
    candidate sets: the ids only, no forward, with the loader's generator restored."""
    ids: list[tuple[torch.Tensor, torch.Tensor]] = []
    with preserved_rng([loader]):
        for index, batch in enumerate(loader):
            where = f"NNTrainParams.val_loader batch {index}"
            _, qids, cids, rel = check_structure(batch, where)
            check_values(rel, task.max_relevance, where)
            ids.append((qids, cids))
    if task.candidate_sets == "full" and ids:
        check_full(torch.cat([q for q, _ in ids]).numpy(), torch.cat([c for _, c in ids]).numpy())


class PairwiseObjective(Objective):
    """The pairwise logistic loss of ``RankingTask.objective()``."""

    def __init__(self, task: Any) -> None:
        super().__init__()
        self.task = task

    def compute(self, net: torch.nn.Module, batch: Any, ctx: ObjectiveContext) -> ObjectiveResult:
        features, qids, _, rel = check_structure(batch, "NNTrainParams.train_loader batch")
        scores = scores_of(net(features), "the ranking network's output")
        numerator, denominator = pairwise_terms(scores, qids, rel, self.task.weighting)
        return ObjectiveResult([LossTerm("pairwise", numerator, denominator)])

    def check(self, model: Any, params: Any) -> None:
        check_request(self.task, model, params)

    def run_identity(self) -> dict[str, Any]:
        return {"weighting": self.task.weighting}

    @property
    def name(self) -> str:
        return "RankingTask.objective"
