#!/usr/bin/env python3
"""GPU check (tests/gpu/run.sh): a real PyTorch DistributedDataParallel training loop on NCCL,
started by torchrun, once plainly and once under `commscope run`.

Usage (as torchrun's script): torch_ddp.py STEPS

Each step is an NVTX range `ProfilerStep#I` (torch.cuda.nvtx: recorded through commscope's NVTX
injection) around forward, backward (DDP all-reduces the gradient buckets through NCCL), the
optimizer step and an explicit all-reduce of the loss; the host waits for the GPU before the
range is popped.  A warm-up step before the loop opens commscope's trace (the first NCCL call
does, in jobs without MPI) and is not a step.  Deterministic (fixed seeds, deterministic
algorithms): the final loss and a checksum of the weights must not change under commscope.
Prints one line:
  torch: steps N step_ms_mean S loss L checksum C
"""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts
    torch.use_deterministic_algorithms(True)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    torch.manual_seed(0)
    width = 4096
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 1024)).cuda()
    # 25 MB buckets over ~54 M parameters (216 MB of fp32 gradients): several all-reduces a step.
    ddp = DDP(model, device_ids=[local], bucket_cap_mb=25)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(512, width, device="cuda", generator=gen)
    y = torch.randn(512, 1024, device="cuda", generator=gen)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        red = loss.detach().clone()
        dist.all_reduce(red)
        return red

    step()  # warm-up: NCCL communicator, cuBLAS handles; opens commscope's trace
    torch.cuda.synchronize()
    total = 0.0
    red = None
    for i in range(steps):
        torch.cuda.nvtx.range_push("ProfilerStep#%d" % i)
        t0 = time.perf_counter()
        red = step()
        torch.cuda.synchronize()
        total += time.perf_counter() - t0
        torch.cuda.nvtx.range_pop()
    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    print("torch: steps %d step_ms_mean %.4f loss %.9e checksum %.12e" % (
        steps, total / steps * 1e3, float(red), checksum), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
