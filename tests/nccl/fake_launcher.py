#!/usr/bin/env python3
"""TEST DOUBLE of torchrun and srun (installed by the tests under those names, or called with
--as NAME; also as mpirun and python3 for dry runs): starts N local
processes of a program with the rank variables the real launcher sets, waits for them and exits
with the first non-zero status.

  torchrun --nproc-per-node N [--standalone] PROGRAM ARGS...   RANK WORLD_SIZE LOCAL_RANK
                                                               MASTER_ADDR MASTER_PORT
                                                               TORCHELASTIC_RUN_ID
  srun -n N PROGRAM ARGS...                                    SLURM_PROCID SLURM_NTASKS
                                                               SLURM_LOCALID SLURM_JOB_ID

FAKE_LAUNCHER_ENV_OUT=PATH: write the LD_PRELOAD every process gets to PATH first.
FAKE_LAUNCHER_DRY=1: start nothing (only write PATH).
"""
import os
import subprocess
import sys


def main():
    me = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    if args[:1] == ["--as"]:
        me, args = args[1], args[2:]
    n = 1
    while args and args[0].startswith("-"):
        a = args.pop(0)
        if a in ("--nproc-per-node", "--nproc_per_node", "-n", "--ntasks", "-N"):
            v = args.pop(0)
            if a != "-N":
                n = int(v)
        elif a.startswith("--nproc-per-node=") or a.startswith("--ntasks="):
            n = int(a.split("=", 1)[1])
    out = os.environ.get("FAKE_LAUNCHER_ENV_OUT")
    if out:
        with open(out, "w") as f:
            f.write(os.environ.get("LD_PRELOAD", "") + "\n")
    if os.environ.get("FAKE_LAUNCHER_DRY") or not args:
        return 0
    procs = []
    for r in range(n):
        env = dict(os.environ)
        if me == "torchrun":
            env.update(RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT="29500", TORCHELASTIC_RUN_ID="fake-%d" % os.getpid())
        else:
            env.update(SLURM_PROCID=str(r), SLURM_NTASKS=str(n), SLURM_LOCALID=str(r),
                       SLURM_JOB_ID=str(os.getpid()), SLURM_STEP_ID="0")
        procs.append(subprocess.Popen(args, env=env))
    rcs = [p.wait() for p in procs]
    return next((rc for rc in rcs if rc), 0)


if __name__ == "__main__":
    sys.exit(main())
