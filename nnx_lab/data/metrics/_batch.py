"""``MetricBatch``: one batch's targets and predictions as the statistics see them, with
each prediction view (labels, log-probabilities, probabilities, ranking scores, values)
derived once, on first use, in float64 on the device."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

__all__ = ["MetricBatch"]


class MetricBatch:
    """One batch's targets and predictions, flattened to rows and on one device.

    ``targets``/``valid`` have shape ``(M,)`` (categorical) or ``(M, K)`` (bernoulli,
    regression); an invalid target (``ignore_index``, NaN, out of range) holds 0 and is
    ``False`` in ``valid``. The prediction views are derived on first use from what the
    caller passed (logits preferred), in float64 on the device (float32 on MPS).
    """

    def __init__(
        self,
        kind: str,
        targets: torch.Tensor,
        valid: torch.Tensor,
        n_classes: int,
        *,
        logits: torch.Tensor | None = None,
        probabilities: torch.Tensor | None = None,
        decoded: torch.Tensor | None = None,
        values: torch.Tensor | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        self.kind, self.targets, self.valid, self.n_classes = kind, targets, valid, n_classes
        self.dtype = dtype
        self._logits, self._probabilities = logits, probabilities
        self._decoded, self._values = decoded, values

    @functools.cached_property
    def labels(self) -> torch.Tensor:
        """Decoded predictions: class indices ``(M,)`` or 0/1 indicators ``(M, K)``."""
        if self._decoded is not None:
            return self._decoded.long()
        if self.kind == "categorical":
            source = self._logits if self._logits is not None else self._probabilities
            assert source is not None
            return source.argmax(dim=-1)
        if self._logits is not None:
            return (self._logits >= 0).long()
        assert self._probabilities is not None
        return (self._probabilities >= 0.5).long()

    @functools.cached_property
    def log_probs(self) -> torch.Tensor:
        """Categorical: log p per class ``(M, C)``. Bernoulli: log p(1) ``(M, K)``."""
        if self._logits is not None:
            z = self._logits.to(self.dtype)
            return F.log_softmax(z, dim=-1) if self.kind == "categorical" else -F.softplus(-z)
        assert self._probabilities is not None
        return torch.log(self._probabilities.to(self.dtype))

    @functools.cached_property
    def log_probs0(self) -> torch.Tensor:
        """Bernoulli only: log p(0) ``(M, K)``."""
        if self._logits is not None:
            return -F.softplus(self._logits.to(self.dtype))
        assert self._probabilities is not None
        return torch.log1p(-self._probabilities.to(self.dtype))

    @functools.cached_property
    def probs(self) -> torch.Tensor:
        """Categorical: p per class ``(M, C)``. Bernoulli: p(1) ``(M, K)``."""
        if self._logits is not None:
            z = self._logits.to(self.dtype)
            return torch.softmax(z, dim=-1) if self.kind == "categorical" else torch.sigmoid(z)
        assert self._probabilities is not None
        return self._probabilities.to(self.dtype)

    @functools.cached_property
    def scores(self) -> torch.Tensor:
        """Ranking scores per class/output for AUROC: the log-odds log p - log(1 - p)
        (categorical, one class against the rest), the logit or p (bernoulli).

        The log-odds order rows as p does, but keep apart what rounds to p = 1 (or to
        log p = 0): only the row's top class can be near 1, and its log(1 - p) is taken
        from the other classes' logits instead of from 1 - p.
        """
        if self.kind == "categorical":
            log_p = self.log_probs
            if self._logits is None:
                return log_p - torch.log1p(-log_p.exp())
            z = self._logits.to(self.dtype)
            top = z.argmax(dim=1, keepdim=True)
            others = z.scatter(1, top, float("-inf"))
            log_rest_top = torch.logsumexp(others, dim=1, keepdim=True) - torch.logsumexp(
                z, dim=1, keepdim=True
            )
            log_rest = torch.log1p(-log_p.exp()).scatter(1, top, log_rest_top)
            return log_p - log_rest
        source = self._logits if self._logits is not None else self._probabilities
        assert source is not None
        return source.to(self.dtype)

    @functools.cached_property
    def values(self) -> torch.Tensor:
        """Regression predictions ``(M, K)``."""
        assert self._values is not None
        return self._values.to(self.dtype)
