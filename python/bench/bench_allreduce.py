#!/usr/bin/env python3
"""The cost of calling mpiar from Python: mpiar.allreduce against the C call it wraps.

    mpiexec.openmpi --oversubscribe --allow-run-as-root -n 2 /usr/bin/python3 \\
        python/bench/bench_allreduce.py [--reps 21] [--small-iters 4000] [--large-iters 8]

The contenders run side by side, interleaved, in one job on the same buffers; each repetition
times one block of calls of each (after a barrier) and the table gives the median over the
repetitions of the time per call on rank 0, as elapsed time and as the calling thread's CPU time
(which leaves out the time the thread was descheduled, so that on a loaded machine the one-rank
overhead stays measurable):

  C(numpy)      mpiar_allreduce in a C loop (mpiar._mpiar._c_loop, GIL released once per block)
                on the NumPy arrays' memory
  numpy         mpiar.allreduce(x, out=y, check=False), NumPy arrays
  numpy+check   mpiar.allreduce(x, out=y): the default, with the cross-rank argument check
  C(torch)      the C loop on the tensors' memory (when torch imports)
  torch         mpiar.allreduce(t, out=u, check=False), torch tensors
  torch+check   mpiar.allreduce(t, out=u)

at 8 B (2 float32: the per-call overhead, Python minus C on the same memory) and 64 MiB
(throughput, Python / C). On one rank the C call does no communication, so the overhead is
measured alone; on two it is measured inside real exchanges.

A second table compares, at 8 B on NumPy arrays without the check, the blocking call with the
nonblocking and persistent forms: the overhead of a nonblocking operation over the blocking one
is that of making the request object (which owns the arrays) and of the separate start and wait.

  allreduce           mpiar.allreduce(x, out=y, check=False)
  iallreduce+wait     mpiar.iallreduce(x, out=y, check=False).wait()
  start+wait          r.start(); r.wait() on r = mpiar.allreduce_init(x, out=y, check=False)
"""

import argparse
import time

import numpy as np
from mpi4py import MPI

import mpiar
from mpiar import _mpiar

try:
    import torch
    torch.set_num_threads(1)
except ImportError:
    torch = None


def contenders(nbytes):
    n = nbytes // 4
    x, y = np.ones(n, np.float32), np.empty(n, np.float32)
    c = {"C(numpy)": lambda iters: _mpiar._c_loop(x, iters, out=y)}

    def loop(a, b, check):
        def run(iters):
            f = mpiar.allreduce
            for _ in range(iters):
                f(a, out=b, check=check)
        return run

    c["numpy"] = loop(x, y, False)
    c["numpy+check"] = loop(x, y, True)
    if torch is not None:
        t, u = torch.ones(n), torch.zeros(n)
        c["C(torch)"] = lambda iters: _mpiar._c_loop(t, iters, out=u)
        c["torch"] = loop(t, u, False)
        c["torch+check"] = loop(t, u, True)
    return c


def nonblocking_contenders(nbytes):
    n = nbytes // 4
    x, y = np.ones(n, np.float32), np.empty(n, np.float32)
    persistent = mpiar.allreduce_init(x, out=y, check=False)

    def blocking(iters):
        f = mpiar.allreduce
        for _ in range(iters):
            f(x, out=y, check=False)

    def nonblocking(iters):
        f = mpiar.iallreduce
        for _ in range(iters):
            f(x, out=y, check=False).wait()

    def started(iters):
        start, wait = persistent.start, persistent.wait
        for _ in range(iters):
            start()
            wait()

    return {"C(numpy)": lambda iters: _mpiar._c_loop(x, iters, out=y), "allreduce": blocking,
            "iallreduce+wait": nonblocking, "start+wait": started}


def measure(nbytes, iters, reps, comm, make=contenders):
    runs = make(nbytes)
    for run in runs.values():  # warm-up: contexts, plans, first touches
        run(max(1, iters // 10))
    wall = {name: [] for name in runs}
    cpu = {name: [] for name in runs}
    for _ in range(reps):
        for name, run in runs.items():
            comm.Barrier()
            t0, c0 = time.perf_counter(), time.thread_time()
            run(iters)
            wall[name].append((time.perf_counter() - t0) / iters)
            cpu[name].append((time.thread_time() - c0) / iters)
    med = {name: float(np.median(v)) for name, v in wall.items()}
    return med, {name: float(np.median(v)) for name, v in cpu.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=21)
    p.add_argument("--small-iters", type=int, default=4000)
    p.add_argument("--large-iters", type=int, default=8)
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    small, small_cpu = measure(8, a.small_iters, a.reps, comm)
    large, _ = measure(64 << 20, a.large_iters, a.reps, comm)
    nb, nb_cpu = measure(8, a.small_iters, a.reps, comm, nonblocking_contenders)
    if comm.Get_rank() != 0:
        return
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"# {comm.Get_size()} ranks, {MPI.Get_library_version().splitlines()[0]}; "
          f"load average {' '.join(load)}; medians of {a.reps} blocks")
    print(f"{'':<14}{'8 B: us/call':>14}{'overhead':>10}{'CPU us/call':>13}{'overhead':>10}"
          f"{'64 MiB: ms/call':>17}{'GB/s':>7}{'vs C':>7}")
    for name in small:
        ref = "C(torch)" if name.startswith("torch") else "C(numpy)"
        s, sc, l = small[name], small_cpu[name], large[name]
        print(f"{name:<14}{s * 1e6:>14.3f}{(s - small[ref]) * 1e6:>10.3f}{sc * 1e6:>13.3f}"
              f"{(sc - small_cpu[ref]) * 1e6:>10.3f}{l * 1e3:>17.3f}{(64 << 20) / l / 1e9:>7.2f}"
              f"{large[ref] / l:>7.3f}")
    print(f"\n{'8 B, NumPy':<18}{'us/call':>10}{'over allreduce':>16}{'CPU us/call':>13}"
          f"{'over allreduce':>16}")
    for name in nb:
        print(f"{name:<18}{nb[name] * 1e6:>10.3f}{(nb[name] - nb['allreduce']) * 1e6:>16.3f}"
              f"{nb_cpu[name] * 1e6:>13.3f}{(nb_cpu[name] - nb_cpu['allreduce']) * 1e6:>16.3f}")


if __name__ == "__main__":
    main()
