"""Parameter-efficient fine-tuning (§3.5): LoRA, DoRA, IA3, adapters, prefix and prompt
tuning: issue 25."""
