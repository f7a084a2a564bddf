#!/usr/bin/env python3
"""Training step time of examples/python/train_mlp.py: mpiar vs torch.distributed (gloo).

    mpiexec.openmpi --allow-run-as-root -n 2 /usr/bin/python3 python/bench/bench_train.py \\
        [--hidden 1024] [--global-batch 32] [--steps 1] [--reps 41] [--bucket-bytes N ...]

The example's model, data and step, with several copies of the model in one job, each averaging
its gradients its own way:

- mpiar.torch.DistributedOptimizer with overlap (the default): gradient hooks start
  asynchronous pushpulls of buckets of gradients during the backward pass, step() waits (one
  contender per --bucket-bytes value; default: the optimizer's default bucket size);
- mpiar.torch.DistributedOptimizer(overlap=False): one fused KVStore pushpull in step();
- torch.distributed's gloo backend: one all_reduce of all gradients, flattened, after the
  backward pass (as the example's --backend gloo);
- none: the same step without any averaging (the computation alone, for reference).

Each repetition runs `steps` steps of each, alternating (the default alternates every step,
which spreads a loaded machine's noise evenly), and the table gives, on rank 0, the medians over
all counted steps of the whole step time and of the averaging time left after the backward pass
(for the hook-driven optimizer: the wait in step(); the reductions that ran during the backward
pass are in the step time only).
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "python"))
import train_mlp as ex  # noqa: E402

import mpiar.torch  # noqa: E402


def step(model, opt, x, y, average):
    """One training step; returns (step time, averaging time)."""
    t0 = time.perf_counter()
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    t1 = time.perf_counter()
    average()
    t2 = time.perf_counter()
    opt.step()
    return time.perf_counter() - t0, t2 - t1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--global-batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--reps", type=int, default=41)
    p.add_argument("--gloo-port", type=int, default=29518)
    p.add_argument("--bucket-bytes", type=int, nargs="*", default=[None],
                   help="bucket sizes of the hook-driven contenders (default: the optimizer's)")
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(1)
    x, y, order = ex.make_data()

    contenders = {}
    for bucket in a.bucket_bytes:
        m = ex.make_model(a.hidden, seed=1)
        opt = mpiar.torch.DistributedOptimizer(
            torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9), m.named_parameters(),
            bucket_bytes=bucket)
        label = "default" if bucket is None else f"{bucket} B"
        name = f"mpiar, hooks (buckets {label}, {len(opt._mpiar_buckets)})"
        contenders[name] = (m, opt, opt.synchronize)
    m1 = ex.make_model(a.hidden, seed=1)
    opt1 = mpiar.torch.DistributedOptimizer(
        torch.optim.SGD(m1.parameters(), lr=0.01, momentum=0.9), m1.named_parameters(),
        overlap=False)
    contenders["mpiar, in step() (overlap=False)"] = (m1, opt1, opt1.synchronize)
    m2 = ex.make_model(a.hidden, seed=1)
    opt2 = torch.optim.SGD(m2.parameters(), lr=0.01, momentum=0.9)
    gloo = ex.GlooAverager(comm, a.gloo_port)
    contenders["torch.distributed gloo"] = (m2, opt2,
                                            lambda: gloo.average(list(m2.parameters())))
    m3 = ex.make_model(a.hidden, seed=1)
    opt3 = torch.optim.SGD(m3.parameters(), lr=0.01, momentum=0.9)
    contenders["none (computation only)"] = (m3, opt3, lambda: None)
    times = {name: ([], []) for name in contenders}
    s = 0
    for rep in range(a.reps + 2):  # the first two repetitions warm up and are not counted
        for name, (model, opt, average) in contenders.items():
            comm.Barrier()
            for i in range(a.steps):
                rows = ex.local_rows(order, s + i, a.global_batch, rank, size)
                st, av = step(model, opt, x[rows], y[rows], average)
                if rep > 1:
                    times[name][0].append(st)
                    times[name][1].append(av)
        s += a.steps
    gloo.dist.destroy_process_group()
    if rank == 0:
        params = sum(p.numel() for p in m1.parameters())
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        print(f"# {size} ranks, MLP hidden {a.hidden}: {params} float32 parameters "
              f"({4 * params / 2**20:.2f} MiB of gradients), global batch {a.global_batch}; "
              f"medians of {a.reps} x {a.steps} steps; load average {load}")
        print(f"{'gradient averaging':<44}{'step ms':>10}{'after backward ms':>19}")
        for name, (st, av) in times.items():
            print(f"{name:<44}{1e3 * np.median(st):>10.3f}{1e3 * np.median(av):>19.3f}")


if __name__ == "__main__":
    main()
