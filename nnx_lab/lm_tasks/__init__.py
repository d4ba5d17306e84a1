"""Causal language models (§3.6): the next-token task, generation, a tokenizer: issue 26."""
