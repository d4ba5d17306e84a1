"""``Nets.FEED_FWD_MOE``: ``MoENN``, a feed-forward network of mixture-of-experts layers.

The load-balancing term is a real term of the loss: ``auxiliary_loss()`` hands the training
step the last training forward's term (summed over layers, with its graph) and its weight
``load_balance_coef`` (``aux_loss``), and the step adds it to the loss before the backward
pass, so the fp16 gradient scaler scales it with the loss. The last forward's term,
detached, is also ``net.load_balance_loss``.
"""

from __future__ import annotations

import torch
from torch import nn

from .aux_loss import AuxTerm
from .moe_params import NNMoEParams
from .nets import activation_module

__all__ = ["MoENN"]


class _MoELayer(nn.Module):
    def __init__(self, p: NNMoEParams) -> None:
        super().__init__()
        self.top_k, self.coef = p.top_k, p.load_balance_coef
        self.router = nn.Linear(p.hidden_dim, p.num_experts)
        self.experts = nn.ModuleList(
            nn.Sequential(
                nn.Linear(p.hidden_dim, p.expert_dim),
                activation_module(p.activation),
                nn.Linear(p.expert_dim, p.hidden_dim),
            )
            for _ in range(p.num_experts)
        )
        self.drop = nn.Dropout(p.dropout_prob)
        self.last_balance = torch.zeros(())
        self.last_term: torch.Tensor | None = None  # with its graph: a training forward's

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = self.router(x).float().softmax(-1)  # (rows, experts)
        gates, chosen = probs.topk(self.top_k, dim=-1)
        gates = (gates / gates.sum(-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            # an expert no row chose still runs (on no rows): its parameters then take
            # part in the backward pass, which DDP requires of every parameter each step
            out.index_add_(0, rows, expert(x[rows]) * gates[rows, slot, None])
        n = probs.shape[-1]
        # Switch Transformer's term: rows routed (first choice) times mean router mass
        share = torch.zeros(n, device=x.device).index_add_(
            0, chosen[:, 0], torch.ones(chosen.shape[0], device=x.device)
        ) / max(chosen.shape[0], 1)
        balance = n * (share * probs.mean(0)).sum()
        self.last_balance = balance.detach()
        self.last_term = balance if self.training and torch.is_grad_enabled() else None
        return x + self.drop(out)


class MoENN(nn.Module):
    def __init__(self, params: NNMoEParams) -> None:
        super().__init__()
        self.inp = nn.Sequential(
            nn.Linear(params.input_dim, params.hidden_dim), activation_module(params.activation)
        )
        self.layers = nn.ModuleList(_MoELayer(params) for _ in range(params.n_layers))
        self.out = nn.Linear(params.hidden_dim, params.output_dim)

    @property
    def load_balance_loss(self) -> torch.Tensor:
        """The last forward's load-balancing term (1.0 is perfectly balanced)."""
        return sum((layer.last_balance for layer in self.layers), torch.zeros(()))

    def auxiliary_loss(self) -> AuxTerm | None:
        """The last training forward's term for the training step (None after an
        evaluation forward)."""
        terms = [layer.last_term for layer in self.layers]
        if any(t is None for t in terms):
            return None
        return AuxTerm("load_balance", sum(terms[1:], terms[0]), self.layers[0].coef)  # type: ignore[arg-type]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h)
        return self.out(h)
