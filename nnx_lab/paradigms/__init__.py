"""Training paradigms on the public hooks (§3.4): distillation, SimCLR, Mixup, CutMix: issue 25."""
