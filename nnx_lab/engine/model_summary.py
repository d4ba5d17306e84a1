"""What a network is made of, as data: ``summarize_model(model, batch=None)``.

One row per module of the tree (its path, depth, type, its own and its subtree's
parameter counts, trainable and frozen, dtypes and devices), and with a sample batch
each module's output shape, read from one no-grad forward on a temporary copy of the
network (forward hooks on the copy; the model, its modes, its gradients and every random
stream are untouched, nothing is written). Totals add the memory of the parameters, of
their gradients (trainable ones) and of the optimizer's state for the configured
optimizer (Adam / AdamW keep two moments per trainable value, SGD with momentum and
RMSprop one, plain SGD none).

The ModelSummary widget only draws this; ``ModelSummaryData.text()`` is the terminal's
version. Each row has a ``columns`` dict for per-parameter annotations: given ``optim``,
the fine-tuning rule that matched each of the row's own parameters (its
``NNParamGroupSpec`` pattern, or "default"), its effective learning rate and weight
decay, and whether it is frozen (``ModelSummaryData.parameters`` has them per parameter).

A module may describe itself: one that defines ``summary_columns() -> dict[str, str]``
adds those cells to its own row (the adapter layers of ``nnx_lab.peft`` name their kind,
settings and trainable count this way; the engine knows no adapter). The totals hold the
``trainable_fraction`` of the parameters.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import ConfigError, DataError
from .adapters import Inputs, adapt_source, forward
from .enums import Optims
from .param_groups import ParameterRule, parameter_rules
from .training_state import preserved_rng

__all__ = ["ModelSummaryData", "SummaryRow", "optimizer_state_slots", "summarize_model"]


@dataclass
class SummaryRow:
    path: str  # "" for the root; "features.0" for a child of a child
    name: str
    depth: int
    type: str
    own_params: int  # parameters registered on this module itself
    params: int  # in its whole subtree
    trainable: int
    frozen: int
    dtypes: list[str]
    devices: list[str]
    has_children: bool
    output_shape: Any = None  # a shape list, a list of them, or None (no batch / not reached)
    columns: dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """ "trainable", "frozen", "mixed" or "" (no parameters)."""
        if not self.params:
            return ""
        if not self.frozen:
            return "trainable"
        return "frozen" if not self.trainable else "mixed"

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "name": self.name,
            "depth": self.depth,
            "type": self.type,
            "own_params": self.own_params,
            "params": self.params,
            "trainable": self.trainable,
            "frozen": self.frozen,
            "state": self.state,
            "dtypes": self.dtypes,
            "devices": self.devices,
            "has_children": self.has_children,
            "output_shape": self.output_shape,
            "columns": self.columns,
        }


@dataclass
class ModelSummaryData:
    rows: list[SummaryRow]
    totals: dict[str, Any]
    input_shape: Any = None
    notes: list[str] = field(default_factory=list)
    parameters: list[ParameterRule] = field(default_factory=list)  # given optim=

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": [r.to_json() for r in self.rows],
            "totals": self.totals,
            "input_shape": self.input_shape,
            "notes": self.notes,
            "parameters": [p.to_json() for p in self.parameters],
        }

    def find(self, text: str) -> list[SummaryRow]:
        """The rows whose path or type contains ``text`` (case-insensitive)."""
        needle = text.lower()
        return [r for r in self.rows if needle in r.path.lower() or needle in r.type.lower()]

    def text(self, max_depth: int | None = None) -> str:
        shapes = any(r.output_shape is not None for r in self.rows)
        extra = list(dict.fromkeys(k for r in self.rows for k in r.columns))
        head = ["layer", "type", "params", "state"] + (["output"] if shapes else []) + extra
        lines = []
        for r in self.rows:
            if max_depth is not None and r.depth > max_depth:
                continue
            label = "  " * r.depth + (r.name or "(root)")
            cells = [label, r.type, f"{r.params:,}", r.state]
            if shapes:
                cells.append(_shape_text(r.output_shape))
            cells += [str(r.columns.get(k, "")) for k in extra]
            lines.append(cells)
        widths = [max(len(str(c)) for c in col) for col in zip(head, *lines, strict=False)]
        fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False))  # noqa: E731
        t = self.totals
        out = [fmt(head), "-" * (sum(widths) + 2 * (len(widths) - 1))]
        out += [fmt(c).rstrip() for c in lines]
        out.append("-" * len(out[1]))
        out.append(
            f"parameters: {t['params']:,} ({t['trainable']:,} trainable, {t['frozen']:,} frozen;"
            f" {_percent(t['trainable_fraction'])} trainable)"
        )
        out.append(
            f"memory: parameters {_bytes(t['param_bytes'])}, buffers {_bytes(t['buffer_bytes'])},"
            f" gradients {_bytes(t['grad_bytes'])}, optimizer state "
            f"{_bytes(t['optimizer_bytes'])} ({t['optimizer']}); total "
            f"{_bytes(t['total_bytes'])}"
        )
        out += [f"note: {n}" for n in self.notes]
        return "\n".join(out)


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def _percent(fraction: float) -> str:
    # small fractions are what adapters are about: keep two significant digits
    return f"{100 * fraction:.2g}%" if 0 < fraction < 0.01 else f"{100 * fraction:.1f}%"


def _shape_text(shape: Any) -> str:
    if shape is None:
        return ""
    if shape and isinstance(shape[0], list):
        return ", ".join(_shape_text(s) for s in shape)
    return "(" + ", ".join(str(s) for s in shape) + ")"


def optimizer_state_slots(optim: Any) -> int:
    """How many values of state the optimizer keeps per trainable value."""
    name = optim if isinstance(optim, Optims) else getattr(optim, "name", optim)
    if name in (Optims.ADAM, Optims.ADAMW):
        return 2
    if name is Optims.SGD:
        momentum = getattr(optim, "momentum", None)
        return 1 if momentum not in (None, 0, 0.0) else 0
    if name is Optims.RMSPROP:
        momentum = getattr(optim, "momentum", None)
        return 1 + (1 if momentum not in (None, 0, 0.0) else 0)
    return 0


def _shapes_of(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return list(out.shape)
    if isinstance(out, tuple | list):
        found = [_shapes_of(o) for o in out]
        found = [f for f in found if f is not None]
        return found or None
    if isinstance(out, dict):
        return _shapes_of(list(out.values()))
    return None


def _sample(net: torch.nn.Module, batch: Any, adapter: Any) -> Any:
    """The inputs of ``batch`` (a tensor, an (X, y) pair, or what the adapter reads)."""
    if isinstance(batch, torch.Tensor):
        return batch
    if adapter is not None:
        adapted = adapt_source([batch], adapter)
        return next(iter(adapted))[0]
    if isinstance(batch, tuple | list) and batch and isinstance(batch[0], torch.Tensor):
        return batch[0]
    raise ConfigError("batch", type(batch).__name__, "pass a tensor of inputs or an (X, y) batch")


def _output_shapes(net: torch.nn.Module, X: Any, device: torch.device) -> dict[str, Any]:
    """Each module's output shape, from a forward on a copy of ``net`` (the model and
    every random stream untouched)."""
    with preserved_rng():
        try:
            twin = copy.deepcopy(net)
        except Exception as exc:
            raise ConfigError(
                "model",
                type(net).__name__,
                f"its network cannot be copied for the forward ({type(exc).__name__}: {exc}); "
                "summarize without batch=",
            ) from None
        twin.eval()
        shapes: dict[str, Any] = {}
        hooks = [
            m.register_forward_hook(
                lambda _m, _i, out, path=path: shapes.__setitem__(path, _shapes_of(out))
            )
            for path, m in twin.named_modules()
        ]
        try:
            with torch.no_grad():
                X = X.to(device) if isinstance(X, torch.Tensor | Inputs) else X
                forward(twin, X)
        except DataError:
            raise
        except Exception as exc:
            raise DataError(
                "batch",
                f"does not go through the network ({type(exc).__name__}: {exc})",
                "pass a batch the model trains on (e.g. next(iter(train_loader)))",
            ) from exc
        finally:
            for h in hooks:
                h.remove()
            del twin
    return shapes


def _own_columns(module: torch.nn.Module) -> dict[str, Any]:
    describe = getattr(type(module), "summary_columns", None)
    if not callable(describe):
        return {}
    cells = describe(module)
    if not isinstance(cells, dict):
        raise ConfigError(
            f"{type(module).__name__}.summary_columns()",
            type(cells).__name__,
            "return a dict of column name -> text",
        )
    return {str(k): str(v) for k, v in cells.items()}


def _rows(net: torch.nn.Module) -> list[SummaryRow]:
    rows = []
    for path, module in net.named_modules():
        own = list(module.parameters(recurse=False))
        every = list(module.parameters())
        trainable = sum(p.numel() for p in every if p.requires_grad)
        total = sum(p.numel() for p in every)
        rows.append(
            SummaryRow(
                path=path,
                name=path.rsplit(".", 1)[-1],
                depth=0 if not path else path.count(".") + 1,
                type=type(module).__name__,
                own_params=sum(p.numel() for p in own),
                params=total,
                trainable=trainable,
                frozen=total - trainable,
                dtypes=sorted({str(p.dtype).removeprefix("torch.") for p in every}),
                devices=sorted({str(p.device) for p in every}),
                has_children=next(module.children(), None) is not None,
                columns=_own_columns(module),
            )
        )
    return rows


_RULE_COLUMNS = ("rule", "lr", "weight decay", "frozen")


def _cell(rule: ParameterRule, column: str) -> str:
    if column == "frozen":
        return "yes" if rule.frozen else "no"
    if rule.frozen:
        return "-"  # a frozen parameter is in no optimizer group
    if column == "rule":
        return str(rule.rule)
    return f"{rule.lr if column == 'lr' else rule.weight_decay:g}"


def _rule_columns(rows: list[SummaryRow], rules: tuple[ParameterRule, ...]) -> None:
    """Each row's own parameters' rule, lr, weight decay and frozen state: one value
    when they agree, else one per parameter ("weight: 1e-05; bias: 0.001")."""
    by_name = {r.name: r for r in rules}
    for row in rows:
        own = {
            key.rsplit(".", 1)[-1]: rule
            for key, rule in by_name.items()
            if key.rpartition(".")[0] == row.path
        }
        if not own:
            continue
        for column in _RULE_COLUMNS:
            cells = {name: _cell(rule, column) for name, rule in own.items()}
            if len(set(cells.values())) == 1:
                row.columns[column] = next(iter(cells.values()))
            else:
                row.columns[column] = "; ".join(f"{n}: {v}" for n, v in cells.items())


def summarize_model(
    model: Any, batch: Any = None, *, optim: Any = None, shapes: bool = True
) -> ModelSummaryData:
    """The summary of an ``NNModel`` (or a bare ``nn.Module``).

    ``batch``: a sample (a tensor of inputs, an ``(X, y)`` batch, or a batch the model's
    adapter reads) for the output shapes. ``optim``: the ``NNOptimParams`` whose state
    memory to count (default Adam, what ``NNOptimParams()`` is); given, each row also
    shows which of its ``param_groups`` rules matched the row's own parameters, their
    effective learning rate and weight decay, and whether they are frozen (a rule that
    matches no trainable parameter is refused, as ``train`` refuses it).
    """
    net = getattr(model, "net", model)
    if not isinstance(net, torch.nn.Module):
        raise ConfigError("model", type(model).__name__, "pass an NNModel or an nn.Module")
    rows = _rows(net)
    rules: tuple[ParameterRule, ...] = ()
    if optim is not None and hasattr(optim, "param_groups"):
        rules = parameter_rules(net, optim)
        _rule_columns(rows, rules)
    input_shape = None
    notes: list[str] = []
    if batch is not None and shapes:
        X = _sample(net, batch, getattr(model, "batch_adapter", None))
        device = next((p.device for p in net.parameters()), torch.device("cpu"))
        found = _output_shapes(net, X, device)
        for r in rows:
            r.output_shape = found.get(r.path)
        input_shape = _shapes_of(X.args if isinstance(X, Inputs) else X)
        if any(r.output_shape is None for r in rows):
            notes.append("modules with no output shape were not called by forward")
    params = list(net.parameters())
    trainable = [p for p in params if p.requires_grad]
    param_bytes = sum(p.numel() * p.element_size() for p in params)
    buffer_bytes = sum(b.numel() * b.element_size() for b in net.buffers())
    grad_bytes = sum(p.numel() * p.element_size() for p in trainable)
    slots = optimizer_state_slots(optim if optim is not None else Optims.ADAM)
    # optimizer state is kept in each parameter's dtype
    optimizer_bytes = slots * grad_bytes
    name = getattr(getattr(optim, "name", None), "value", None) or "adam"
    n_params = sum(p.numel() for p in params)
    n_trainable = sum(p.numel() for p in trainable)
    totals = {
        "params": n_params,
        "trainable": n_trainable,
        "trainable_fraction": n_trainable / n_params if n_params else 0.0,
        "frozen": sum(p.numel() for p in params if not p.requires_grad),
        "param_bytes": param_bytes,
        "buffer_bytes": buffer_bytes,
        "grad_bytes": grad_bytes,
        "optimizer_bytes": optimizer_bytes,
        "optimizer": name,
        "optimizer_slots": slots,
        "total_bytes": param_bytes + buffer_bytes + grad_bytes + optimizer_bytes,
        "modules": len(rows),
    }
    return ModelSummaryData(rows, totals, input_shape, notes, list(rules))
