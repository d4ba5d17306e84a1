"""Parameter-efficient fine-tuning (§3.5): LoRA, DoRA, IA3, bottleneck adapters, prefix
and prompt tuning, merging, and saving only the adapters (docs/peft.md).

Adapters are plain ``nn.Module`` layers put into a network; training, freezing,
parameter groups, checkpoints and resume are the engine's own, unchanged.
"""

from __future__ import annotations

from ._base import PeftLayer, peft_layers
from .adapter import AdapterLayer
from .dora import DoRALinear, apply_dora_to
from .ia3 import IA3Linear, apply_ia3_to
from .io import base_fingerprint, load_lora_weights, save_lora_weights
from .lora import LoRALinear, apply_lora_to
from .merge import merge_adapters
from .prefix import PrefixTuner, PromptTuner

__all__ = [
    "AdapterLayer",
    "DoRALinear",
    "IA3Linear",
    "LoRALinear",
    "PeftLayer",
    "PrefixTuner",
    "PromptTuner",
    "apply_dora_to",
    "apply_ia3_to",
    "apply_lora_to",
    "base_fingerprint",
    "load_lora_weights",
    "merge_adapters",
    "peft_layers",
    "save_lora_weights",
]
