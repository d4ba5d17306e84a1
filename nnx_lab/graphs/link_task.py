"""``LinkTask`` and ``link_predictor_spec`` (§3.9): link prediction on a ``LinkSplit``.

Every batch is a dict ``{"labels", "pairs", "x", "edge_index"}``: candidate pairs
``(P, 2)`` with 0/1 labels, the node features, and the message graph the encoder runs
on, which is always the split's training topology. Training batches hold training
positives; the objective draws as many negatives per batch from its own checkpointed
generator (uniform pairs that are not training edges). Validation and test batches hold
the held-out positives and the split's fixed negatives.

A held-out positive in a batch's message graph would leak the answer: ``check(model,
params)`` (called by the engine before any run directory or update) refuses it, naming
the pair. The default train and predict paths refuse dict batches; use the task's
``objective()``, ``eval_step()`` and ``predict()``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ..data.metrics import MetricSpec
from ..engine.components import ComponentSpec
from ..engine.edp import EDP
from ..engine.enums import Nets
from ..engine.nets_graph import conv_layer, require_pyg
from ..engine.objective import LossTerm, Objective, ObjectiveResult
from ..engine.registry import ModelSpec, register_model_factory
from ..errors import ConfigError, DataError
from .dataset import check_graph_tensors
from .link_metrics import link_metrics
from .link_split import SLOTS, LinkSplit, pair_codes

__all__ = ["LINK_PREDICTOR_ID", "LinkPrediction", "LinkTask", "link_predictor_spec"]

LINK_PREDICTOR_ID = "nnx_lab.link_predictor"
_CONVS = {"gcn": Nets.GRAPH_CONV, "sage": Nets.GRAPH_SAGE, "gat": Nets.GRAPH_ATT}


def link_predictor_spec(
    input_dim: int, *, hidden_dims: Any = (32, 32), conv: str = "sage", seed: int = 0
) -> ModelSpec:
    """A registered encoder (message-passing layers) + dot-product decoder: one logit
    per candidate pair."""
    if isinstance(input_dim, bool) or not isinstance(input_dim, int) or input_dim < 1:
        raise ConfigError("link_predictor_spec.input_dim", input_dim, "pass the node features")
    hidden = list(hidden_dims)
    if not hidden or any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in hidden):
        raise ConfigError("link_predictor_spec.hidden_dims", hidden_dims, "pass positive ints")
    if conv not in _CONVS:
        raise ConfigError("link_predictor_spec.conv", conv, f"use one of {', '.join(_CONVS)}")
    require_pyg("link_predictor_spec")
    config = {"input_dim": input_dim, "hidden_dims": hidden, "conv": conv}
    return ModelSpec(LINK_PREDICTOR_ID, 1, config, seed=seed)


class LinkPredictorNN(nn.Module):
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        dims = [config["input_dim"], *config["hidden_dims"]]
        kind = _CONVS[config["conv"]]
        self.encoder = nn.ModuleList(conv_layer(kind, a, b) for a, b in itertools.pairwise(dims))
        self.output_dim = 1  # one logit per pair: the engine cannot probe dict batches

    def forward(self, batch: Any) -> torch.Tensor:
        if not isinstance(batch, dict) or "pairs" not in batch:
            raise DataError(
                "batch",
                f"is a {type(batch).__name__}, not a link batch",
                "train with LinkTask.objective() / eval_step() and score with LinkTask.predict()",
            )
        h = batch["x"]
        for i, conv in enumerate(self.encoder):
            h = conv(h, batch["edge_index"])
            if i < len(self.encoder) - 1:
                h = h.relu()
        pairs = batch["pairs"]
        return (h[pairs[:, 0]] * h[pairs[:, 1]]).sum(-1)


register_model_factory(LINK_PREDICTOR_ID, 1, LinkPredictorNN)


@dataclass(frozen=True)
class LinkPrediction:
    """``LinkTask.predict``'s result: float64 ``logits``, 0/1 ``targets`` and the
    candidate ``pairs`` (P, 2), in the loader's order."""

    logits: np.ndarray
    targets: np.ndarray
    pairs: np.ndarray


class _LinkObjective(Objective):
    """BCE over the batch's positives and as many sampled negatives."""

    def __init__(self, task: LinkTask, seed: int) -> None:
        super().__init__()
        self.task, self.seed = task, seed
        self.generator = torch.Generator().manual_seed(seed)

    def compute(self, net: nn.Module, batch: Any, ctx: Any) -> ObjectiveResult:
        pos = batch["pairs"]
        neg = self.task.sample_negatives(int(pos.shape[0]), self.generator).to(pos.device)
        pairs = torch.cat([pos, neg])
        labels = torch.cat([batch["labels"], torch.zeros(neg.shape[0], device=pos.device)])
        logits = net({**batch, "pairs": pairs}).float()
        loss = nn.functional.binary_cross_entropy_with_logits(logits, labels, reduction="sum")
        return ObjectiveResult([LossTerm("bce", loss, int(labels.numel()))])

    def check(self, model: Any, params: Any) -> None:
        self.task.check(model, params)

    def identity_target(self) -> Any:
        return type(self)

    def component_spec(self) -> ComponentSpec:
        return ComponentSpec("link_negatives", version=1)

    def component_state(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state()}

    def load_component_state(self, state: dict[str, Any], version: int) -> None:
        self.generator.set_state(state["generator"])


class LinkTask:
    """Candidate batches, the objective, the evaluator and the predictions of one
    ``LinkSplit``."""

    def __init__(self, split: LinkSplit, *, seed: int = 0) -> None:
        if not isinstance(split, LinkSplit):
            raise ConfigError("LinkTask.split", split, "pass split_links(edge_index, num_nodes)")
        require_pyg("LinkTask")
        self.split, self.seed = split, seed
        self.message_edges = split.message_edges()
        n = split.num_nodes
        self._train_codes = pair_codes(split.positives["train"], n)
        self._held_out = split.held_out_codes()

    def loader(self, split_name: str, x: Any, batch_size: int) -> list[dict[str, torch.Tensor]]:
        """Batches of ``batch_size`` candidates of ``split_name`` (``"train"`` holds
        positives; ``"val"`` / ``"test"`` positives then the fixed negatives)."""
        if split_name not in SLOTS:
            raise ConfigError("LinkTask.loader.split_name", split_name, "use train, val or test")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError("LinkTask.loader.batch_size", batch_size, "pass an int >= 1")
        if isinstance(x, torch.Tensor) and x.ndim == 2 and int(x.shape[0]) != self.split.num_nodes:
            raise DataError(
                "LinkTask.loader.x",
                f"has {int(x.shape[0])} rows for a split of {self.split.num_nodes} nodes",
                "pass one feature row per node",
            )
        x, _ = check_graph_tensors(x, self.message_edges, "LinkTask.loader")
        pos = self.split.positives[split_name]
        pairs = [pos]
        labels = [torch.ones(pos.shape[0])]
        if split_name != "train":
            neg = self.split.negatives[split_name]
            pairs.append(neg)
            labels.append(torch.zeros(neg.shape[0]))
        all_pairs, all_labels = torch.cat(pairs), torch.cat(labels)
        if all_pairs.shape[0] == 0:
            raise DataError(
                f"LinkTask.loader({split_name!r})", "holds no candidate", "plan larger splits"
            )
        return [
            {
                "labels": all_labels[s : s + batch_size],
                "pairs": all_pairs[s : s + batch_size],
                "x": x,
                "edge_index": self.message_edges,
            }
            for s in range(0, all_pairs.shape[0], batch_size)
        ]

    def sample_negatives(self, count: int, generator: torch.Generator) -> torch.Tensor:
        """``count`` uniform pairs u != v that are not training edges."""
        n = self.split.num_nodes
        out = torch.zeros(0, 2, dtype=torch.long)
        while out.shape[0] < count:
            u = torch.randint(0, n, (2 * count,), generator=generator)
            v = torch.randint(0, n, (2 * count,), generator=generator)
            pairs = torch.stack([u, v], 1)
            ok = (u != v) & ~torch.isin(pair_codes(pairs, n), self._train_codes)
            out = torch.cat([out, pairs[ok]])
        return out[:count]

    def objective(self) -> Objective:
        return _LinkObjective(self, self.seed)

    def metric_specs(self) -> list[MetricSpec]:
        return [MetricSpec("auroc")]

    def check(self, model: Any, params: Any) -> None:
        """Refuse a batch whose message graph holds a held-out positive."""
        for field in ("train_loader", "val_loader"):
            loader = getattr(params, field, None)
            for batch in loader or ():
                self.check_batch(batch, f"NNTrainParams.{field}")

    def check_batch(self, batch: Any, field: str) -> None:
        if not isinstance(batch, dict) or "edge_index" not in batch:
            raise DataError(field, f"holds a {type(batch).__name__}", "use LinkTask.loader(...)")
        edges = torch.as_tensor(batch["edge_index"]).cpu()
        codes = pair_codes(edges.t().long(), self.split.num_nodes)
        leak = torch.isin(codes, self._held_out)
        if bool(leak.any()):
            u, v = edges[:, int(leak.nonzero()[0])].tolist()
            raise DataError(
                f"{field}.edge_index",
                f"the message graph holds the held-out positive ({u}, {v})",
                "pass only the training topology (LinkTask.loader builds it)",
            )

    def eval_step(self) -> Any:
        task = self

        def link_eval_step(ctx: Any) -> EDP:
            pred = task._scores(ctx.model, ctx.val_loader, ctx.device)
            m = link_metrics(pred.logits, pred.targets, from_logits=True)
            return EDP(
                loss=m["bce"],
                samples=m["samples"],
                metrics={"auroc": m["auroc"]},
                extra={"average_precision": m["average_precision"]},
            )

        return link_eval_step

    def _scores(self, net: nn.Module, loader: Any, device: Any) -> LinkPrediction:
        logits, targets, pairs = [], [], []
        for batch in loader:
            self.check_batch(batch, "loader")
            moved = {k: v.to(device) for k, v in batch.items()}
            logits.append(net(moved).detach().double().cpu())
            targets.append(batch["labels"].double())
            pairs.append(batch["pairs"])
        if not logits:
            raise DataError("loader", "yields no batch", "pass LinkTask.loader(...)")
        return LinkPrediction(
            torch.cat(logits).numpy(), torch.cat(targets).numpy(), torch.cat(pairs).numpy()
        )

    def predict(self, model: Any, loader: Any) -> LinkPrediction:
        """The float64 logits of every candidate of ``loader``, under eval mode."""
        net = model.net
        was = net.training
        net.eval()
        try:
            with torch.no_grad():
                return self._scores(net, loader, model.device)
        finally:
            net.train(was)
