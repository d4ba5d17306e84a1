"""Causal language models (§3.6): the next-token task, a tokenizer that ships, a
generated corpus, and generation with a logits chain and a KV cache (issue 26)."""

from ..engine.nets_transformer import KVCache
from ._corpus import lm_loaders, token_windows, toy_corpus
from ._generate import Generation, GenerativeNNModel, generate, generate_details
from ._logits import LogitsChain, RepetitionPenalty, TemperatureScaling, TopKFilter, TopPFilter
from ._task import CausalLMTask, TokenBatch
from ._tokenizer import CharTokenizer

__all__ = [
    "CausalLMTask",
    "CharTokenizer",
    "Generation",
    "GenerativeNNModel",
    "KVCache",
    "LogitsChain",
    "RepetitionPenalty",
    "TemperatureScaling",
    "TokenBatch",
    "TopKFilter",
    "TopPFilter",
    "generate",
    "generate_details",
    "lm_loaders",
    "token_windows",
    "toy_corpus",
]
