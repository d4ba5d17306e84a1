"""GenerationPlayground: continuations of a prompt from a language model, side by side.

The page holds the settings (prompt, temperature, top-k, top-p, seed, the number of
continuations and their length); the kernel draws the tokens with
``nnx_lab.lm_tasks.generate_details`` and sends them back, each with its probability
and the five most likely tokens at that step (shown on hover). Passed as a callback to
``train()``, it draws again at each epoch's end from the network as that epoch left it
(the weights the LAST checkpoint holds), so the continuations change while the model
learns. Generation draws from its own seeded generator and runs the network in eval
mode, so watching a run never changes what it trains.
"""

from __future__ import annotations

import threading
from typing import Any

import traitlets as t

from ..errors import ConfigError
from ..lm_tasks import LogitsChain, generate_details
from ._base import NNxWidget, never_breaks

__all__ = ["GenerationPlayground"]


def _token_text(tokenizer: Any, i: int) -> str:
    try:
        return tokenizer.decode([i], specials=True)
    except TypeError:  # a tokenizer without the keyword
        return tokenizer.decode([i])


class GenerationPlayground(NNxWidget):
    """``GenerationPlayground(model, tokenizer, prompt="", *, n=3, max_new_tokens=40,
    temperature=1.0, top_k=0, top_p=1.0, seed=0)``.

    ``model``: an ``NNModel`` (or ``GenerativeNNModel``) of a causal language model, or
    its ``nn.Module``. ``tokenizer``: anything with ``encode(text)`` and ``decode(ids)``
    (``nnx_lab.lm_tasks.CharTokenizer``). ``top_k=0`` and ``top_p=1.0`` filter nothing.
    Pass it in ``callbacks=[...]`` to draw again at every epoch's end.
    """

    _bundle_name = "playground"
    _page_traits = NNxWidget._page_traits | {
        "prompt",
        "temperature",
        "top_k",
        "top_p",
        "seed",
        "n",
        "max_new_tokens",
    }

    prompt = t.Unicode("").tag(sync=True)
    temperature = t.Float(1.0, min=0.0, max=5.0).tag(sync=True)
    top_k = t.Int(0, min=0).tag(sync=True)
    top_p = t.Float(1.0, min=0.0, max=1.0).tag(sync=True)
    seed = t.Int(0, min=0).tag(sync=True)
    n = t.Int(3, min=1, max=8).tag(sync=True)
    max_new_tokens = t.Int(40, min=1, max=512).tag(sync=True)
    samples = t.List(help="Each continuation: its text and its tokens with probabilities.").tag(
        sync=True
    )
    epoch = t.Int(0, help="The epoch whose network drew the samples (0: before training).").tag(
        sync=True
    )
    version = t.Int(0, help="Counts the draws.").tag(sync=True)

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        prompt: str = "",
        *,
        n: int = 3,
        max_new_tokens: int = 40,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        draw: bool = True,
    ) -> None:
        import torch

        net = getattr(model, "net", model)
        if not isinstance(net, torch.nn.Module):
            raise ConfigError(
                "GenerationPlayground(model)", model, "pass an NNModel or an nn.Module"
            )
        if not callable(getattr(tokenizer, "encode", None)) or not callable(
            getattr(tokenizer, "decode", None)
        ):
            raise ConfigError(
                "GenerationPlayground(tokenizer)",
                tokenizer,
                "pass a tokenizer with encode(text) and decode(ids), e.g. CharTokenizer",
            )
        tokenizer.encode(prompt)  # an unknown character is refused before a widget exists
        _chain(temperature, top_k, top_p)
        super().__init__(
            prompt=prompt,
            n=n,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
        )
        self._net, self._tokenizer, self._lock = net, tokenizer, threading.Lock()
        if draw:
            self.draw()

    def summary(self) -> str:
        return f"{len(self.samples)} continuations of {self.prompt!r}, epoch {self.epoch}"

    def texts(self) -> list[str]:
        """The continuations drawn last, as text (the prompt not included)."""
        return [s["text"] for s in self.samples]

    def draw(self) -> list[str]:
        """Draw ``n`` continuations now with the page's settings; returns their texts."""
        with self._lock:
            tok = self._tokenizer
            ids = tok.encode(self.prompt) or [getattr(tok, "eos_id", 0)]
            out = generate_details(
                self._net,
                ids,
                self.max_new_tokens,
                logits_chain=_chain(self.temperature, self.top_k, self.top_p),
                temperature=self.temperature,
                seed=self.seed,
                n=self.n,
                eos_id=getattr(tok, "eos_id", None),
            )
            samples = []
            for row in range(out.new.shape[0]):
                tokens = []
                for step, i in enumerate(out.new[row].tolist()):
                    top = zip(
                        out.top_ids[row, step].tolist(),
                        out.top_probs[row, step].tolist(),
                        strict=True,
                    )
                    tokens.append(
                        {
                            "text": _token_text(tok, i),
                            "prob": float(out.probs[row, step]),
                            "top": [[_token_text(tok, j), float(p)] for j, p in top],
                        }
                    )
                    if i == getattr(tok, "eos_id", None):
                        break
                samples.append({"text": tok.decode(out.new[row].tolist()), "tokens": tokens})
            self.samples = samples
            self.error = ""
            self.version += 1
            return self.texts()

    def _on_generate(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self.draw()

    # -- NNx's callback protocol: draw again from the network each epoch left -------------
    @never_breaks("training")
    def on_epoch_end(self, ctx: Any) -> None:
        self._net = getattr(ctx.model, "net", self._net)
        self.epoch = int(ctx.epoch)
        self.draw()


def _chain(temperature: float, top_k: int, top_p: float) -> LogitsChain:
    """The chain the sliders describe (0 / 1.0: that filter is off); bad values refused."""
    return LogitsChain.build(
        temperature if temperature > 0 else 1.0,
        top_k if top_k else None,
        top_p if top_p < 1.0 else None,
    )
