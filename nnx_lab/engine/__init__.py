"""The kernel-side engine: pure PyTorch, NumPy and safetensors.

Never imports Jupyter, widget or plotting packages at module level, so it runs
unchanged in a script, a test or a distributed worker.
"""
