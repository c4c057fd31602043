"""A data-parallel training loop on PyTorch's CPU backend (gloo), profiled: started by torchrun
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), it writes OUT/trace_rank<RANK>.json.

Usage: gloo_train.py OUT.  Each profiled step: forward, backward (DDP's gradient all-reduce),
optimizer, and one explicit all_reduce."""
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule


def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    # a collective that cannot complete fails within a minute rather than stalling the test
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(256, 256))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        loss = model(torch.randn(64, 256)).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        t = torch.ones(1000)
        dist.all_reduce(t)

    def ready(p):
        p.export_chrome_trace(os.path.join(out, "trace_rank%d.json" % rank))

    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=1, active=3), on_trace_ready=ready) as p:
        for _ in range(6):
            step()
            p.step()
    dist.destroy_process_group()
    # Debian's torch 1.13 sometimes hangs after this, in a destructor at interpreter teardown
    # (a stack dump shows the main thread past main(), a native thread without Python frames):
    # the trace is written, so the worker ends here.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
