"""Causal language models (§3.6): the next-token task, a tokenizer that ships, a
generated corpus, and generation with a logits chain and a KV cache (issue 26)."""

from ._task import CausalLMTask, TokenBatch

__all__ = ["CausalLMTask", "TokenBatch"]
