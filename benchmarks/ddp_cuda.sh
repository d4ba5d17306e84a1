#!/usr/bin/env bash
# The DDP benchmark on a CUDA host: NCCL, 1 process against one process per GPU.
# Run from the repository root in an environment with nnx_lab and a CUDA torch installed:
#   bash benchmarks/ddp_cuda.sh
# Paste its output into docs/distributed.md ("Measured").
set -euo pipefail
n=$(python -c "import torch; print(torch.cuda.device_count())")
if [ "$n" -lt 1 ]; then echo "no CUDA device visible" >&2; exit 1; fi
nvidia-smi -L
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
python benchmarks/ddp.py --device cuda --nproc "$n" --epochs 3 --reps 3
