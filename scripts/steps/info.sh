#!/bin/bash
# info.sh — step "info": GPUs, topology, peer access, driver, MPI / NCCL / torch versions ($L/info.txt).
. "$(dirname "$0")/lib.sh"
{
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv
  nvidia-smi topo -m
  nproc
  mpirun --version 2>&1 | head -n 1
  ls /usr/lib/x86_64-linux-gnu/libnccl* /usr/local/lib/libnccl* 2>/dev/null
  python3 -c 'import torch; n = torch.cuda.device_count(); print("torch", torch.__version__, "gpus", n, "nccl", torch.cuda.nccl.version())' 2>&1
} >"$L/info.txt" 2>&1
echo "info: $(sed -n 2p "$L/info.txt")"
