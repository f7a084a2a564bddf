"""torch.distributed on the mpiar backend against gloo, in one job: dist.all_reduce,
dist.all_gather_into_tensor and dist.reduce_scatter_tensor of float32 tensors from 4 B to 64 MiB, and a DDP training step.

    mpiexec.openmpi -n 2 /usr/bin/python3 perf/python/bench_dist.py

The default group is mpiar's; gloo's is new_group(backend="gloo") on the same ranks. For each
size the two backends alternate, block after block (a block: a barrier, then calls timed back to
back, ~``--block-ms`` long; each repetition of the rotation starts one call further on), and the
table gives the median time per call of each and the ratio
gloo / mpiar (rank 0). Sizes are what each rank contributes: the all_reduce's tensor, the
all_gather's input, the reduce_scatter's output times the number of ranks (its input). gloo
(torch 1.13) has neither all_gather_into_tensor nor reduce_scatter; its columns are what a
program does instead: all_gather into views of the output tensor, and all_reduce of the input
into a copy, then this rank's block. ``--ddp`` also times DDP training steps of
examples/python/ddp_train.py's CNN (``--width``), rotating the two backends and the no-op one
(the computation alone) step by step.

The all_reduce table also gives the floor of any backend written in Python: ``dist.all_reduce``
on a group of the "noop" backend registered here (a Python ProcessGroup of the same shape as
mpiar's, whose allreduce returns a completed Work and moves no data), which is what torch's own
dispatch costs; and ``mpiar.allreduce`` called on the tensor directly (the library's call from
Python, with the default argument check). "over floor" is mpiar's time less the no-op's: what
the backend itself costs per call. Its last two columns time the backend's all_reduce on the
same group with its node-shared staging pool off for those blocks (``pool_bytes`` and
``pool_allreduce_bytes`` 0), in the same rotation: "without / with" above 1 is what the pool
gains at the sizes where the default group stages (all_reduce from ``--pool-allreduce-bytes``,
1 MiB by default, to 16 MiB; the forms below from ``--pool-bytes``, 1 MiB). ``--collectives`` also takes
``all_reduce_coalesced`` (two tensors), ``all_gather_list`` (dist.all_gather into a list) and
``reduce_scatter_list`` (dist.reduce_scatter from a list; gloo's column as above), whose tables
have the same two columns.
"""

import argparse
import collections
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from mpi4py import MPI

import mpiar
import mpiar.torch  # noqa: F401  (registers the backend)

SIZES = [4 << (2 * i) for i in range(13)]  # 4 B .. 64 MiB, x4


class NoopWork(dist.Work):
    """A completed work: what a Python backend returns at the least. The last works stay
    referenced from Python: a C++ caller (DDP) holds only the C++ half of a Python work, whose
    methods would otherwise fall back to the base class's (a wait that never returns)."""

    kept = collections.deque(maxlen=1024)

    def __init__(self, result):
        super().__init__()
        self._result = result
        NoopWork.kept.append(self)

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def result(self):
        return self._result

    def get_future(self):
        fut = torch.futures.Future()
        fut.set_result(self._result)
        return fut


class NoopGroup(dist.ProcessGroup):
    """The floor: a Python process group whose allreduce and broadcast do nothing (a DDP step
    on it is the computation alone). allgather copies the input into every output, which is
    what every rank would receive from ranks that hold the same (DDP's check of the model's
    shapes at its start)."""

    def allreduce(self, tensors, opts=None):
        return NoopWork(tensors)

    def broadcast(self, tensors, opts=None):
        return NoopWork(tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        for outs, inp in zip(output_tensors, input_tensors):
            for o in outs:
                o.copy_(inp)
        return NoopWork(output_tensors)

    def getBackendName(self):
        return "noop"


dist.Backend.register_backend("noop", lambda opts, pg_options=None: NoopGroup(
    opts.group_rank, opts.group_size), extended_api=True)


def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}"
    return f"{n} B"


def gloo_reduce_scatter(out, inp, group):
    tmp = inp.clone()
    dist.all_reduce(tmp, group=group)
    r = dist.get_rank(group)
    n = out.numel()
    out.copy_(tmp[r * n:(r + 1) * n])


def calls(kind, nbytes, size, comm=None):
    """The mpiar call and gloo's for one size; for all_reduce also the floor's two (the no-op
    backend's and mpiar.allreduce directly) and the mpiar backend's without its staging pool."""
    n = max(1, nbytes // 4)
    if kind == "all_reduce":
        t = torch.ones(n)
        return (lambda g: dist.all_reduce(t, group=g), lambda g: dist.all_reduce(t, group=g),
                lambda g: dist.all_reduce(t, group=g),
                lambda g: mpiar.allreduce(t, out=t, comm=comm),
                lambda g: dist.all_reduce(t, group=g))
    if kind == "all_reduce_coalesced":
        ts = [torch.ones(k) for k in (n // 2, n - n // 2)]

        def coalesced(g):
            dist.all_reduce_coalesced(ts, group=g)

        return coalesced, coalesced, None, None, coalesced
    if kind == "all_gather_list":
        x = torch.ones(n)
        views = [torch.empty(n) for _ in range(size)]

        def gather_list(g):
            dist.all_gather(views, x, group=g)

        return gather_list, gather_list, None, None, gather_list
    if kind == "reduce_scatter_list":
        m = max(1, n // size)
        ins = [torch.ones(m) for _ in range(size)]
        out = torch.empty(m)

        def scatter_list(g):
            if g is None or isinstance(g, mpiar.torch.ProcessGroupMpiar):  # mpiar's group
                dist.reduce_scatter(out, ins, group=g)
            else:
                gloo_reduce_scatter(out, torch.cat(ins), g)

        return scatter_list, scatter_list, None, None, scatter_list
    if kind == "all_gather":
        x = torch.ones(n)
        out = torch.empty(n * size)
        views = list(out.chunk(size))
        return (lambda g: dist.all_gather_into_tensor(out, x, group=g),
                lambda g: dist.all_gather(views, x, group=g))
    n = max(1, n // size)
    inp = torch.ones(n * size)
    out = torch.empty(n)
    return (lambda g: dist.reduce_scatter_tensor(out, inp, group=g),
            lambda g: gloo_reduce_scatter(out, inp, g))


def median_us(times):
    return statistics.median(times) * 1e6


CLOCK = time.perf_counter


def time_block(fn, group, iters, comm):
    comm.Barrier()
    t0 = CLOCK()
    for _ in range(iters):
        fn(group)
    return (CLOCK() - t0) / iters


def time_unstaged(fn, group, iters, comm):
    """time_block on the mpiar group ``group`` with its staging pool off (pool_bytes and
    pool_allreduce_bytes 0) for the block: the same group and communicator as the staged call."""
    saved = group.pool_bytes, group.pool_allreduce_bytes
    group.pool_bytes = group.pool_allreduce_bytes = 0
    try:
        return time_block(fn, group, iters, comm)
    finally:
        group.pool_bytes, group.pool_allreduce_bytes = saved


def bench(kind, sizes, reps, block_ms, groups, comm):
    """Per size: the median time per call (us) of each call of calls(), in its order."""
    rows = []
    size = comm.Get_size()
    for nbytes in sizes:
        fns = calls(kind, nbytes, size, groups[3])
        for i, (f, g) in enumerate(zip(fns, groups)):
            if f is not None:
                (time_unstaged if i == 4 else time_block)(f, g, 1, comm)
        # Calibrate the block length on the slower (gloo) call, agreed across ranks; the floor's
        # calls run as many times (they are faster still).
        one = time_block(fns[1], groups[1], 1, comm)
        iters = comm.allreduce(max(1, min(2000, int(block_ms / 1e3 / max(one, 1e-7)))),
                               op=MPI.MAX)
        times = [[] for _ in fns]
        runs = [i for i, f in enumerate(fns) if f is not None]
        for rep in range(reps):
            # Each repetition starts one call further on, so that no call always follows the
            # same other (gloo's threads, still busy after its block, slow the next one).
            for i in runs[rep % len(runs):] + runs[:rep % len(runs)]:
                timer = time_unstaged if i == 4 else time_block
                times[i].append(timer(fns[i], groups[i], iters, comm))
        rows.append((nbytes, [median_us(t) if t else None for t in times]))
    return rows


def bench_ddp(steps, width, gloo, noop, comm):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                                    "python"))
    from ddp_train import CNN, batch
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    rank, size = comm.Get_rank(), comm.Get_size()
    models = {}
    order = ("mpiar", "gloo", "noop")
    for name, group in zip(order, (None, gloo, noop)):
        torch.manual_seed(0)
        m = CNN(width)
        d = DDP(m, process_group=group if group is not None else dist.group.WORLD)
        models[name] = (d, torch.optim.SGD(d.parameters(), lr=0.01, momentum=0.9))
    times = {name: [] for name in order}
    x, y = batch(0, 64 * size)
    share = x.shape[0] // size
    xs, ys = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
    for step in range(steps + 3):
        for name in order[step % 3:] + order[:step % 3]:
            d, opt = models[name]
            comm.Barrier()
            t0 = time.perf_counter()
            opt.zero_grad()
            F.cross_entropy(d(xs), ys).backward()
            opt.step()
            if step >= 3:
                times[name].append(time.perf_counter() - t0)
    nparams = sum(p.numel() for p in models["mpiar"][0].parameters())
    return nparams, {k: statistics.median(v) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--block-ms", type=float, default=20.0)
    ap.add_argument("--min-bytes", type=int, default=0)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--collectives", default="all_reduce,all_gather,reduce_scatter")
    ap.add_argument("--ddp", action="store_true", help="also time DDP training steps")
    ap.add_argument("--ddp-steps", type=int, default=21)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--cpu", action="store_true",
                    help="time the calls in CPU time of the calling thread (time.thread_time), "
                         "which a loaded machine's descheduling does not inflate; at one rank "
                         "it is the per-call cost of each layer")
    ap.add_argument("--inline-bytes", type=int, default=None,
                    help="ProcessGroupMpiar's inline_bytes (calls up to it run in the caller)")
    ap.add_argument("--pool-bytes", type=int, default=None,
                    help="the default group's pool_bytes (the list forms and all_reduce_coalesced "
                         "stage in the node-shared pool from it on)")
    ap.add_argument("--pool-allreduce-bytes", type=int, default=None,
                    help="the default group's pool_allreduce_bytes (all_reduce stages through the "
                         "pool from it on)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    if args.cpu:
        global CLOCK
        CLOCK = time.thread_time
    options = {k: v for k, v in (("inline_bytes", args.inline_bytes),
                                 ("pool_bytes", args.pool_bytes),
                                 ("pool_allreduce_bytes", args.pool_allreduce_bytes))
               if v is not None} or None
    dist.init_process_group("mpiar", pg_options=options)
    gloo = dist.new_group(backend="gloo")
    noop = dist.new_group(backend="noop")
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    sizes = [s for s in SIZES if args.min_bytes <= s <= args.max_bytes]
    if rank == 0:
        print(f"# {comm.Get_size()} ranks, torch {torch.__version__}, medians of {args.reps} "
              f"blocks of ~{args.block_ms:g} ms, load {os.getloadavg()[0]:.2f}"
              f"{', CPU time of the calling thread' if args.cpu else ''}")
    # The mpiar backend's group is the default one (None); the direct call's is its communicator.
    # The fifth: the default group itself, with its pool off during that call's blocks (bench).
    default = dist.distributed_c10d._get_default_group()
    groups = (None, gloo, noop, default.comm, default)
    for kind in filter(None, args.collectives.split(",")):
        rows = bench(kind, sizes, args.reps, args.block_ms, groups, comm)
        if rank != 0:
            continue
        if kind == "all_reduce":
            print(f"\n| {kind} | mpiar, us | gloo, us | gloo / mpiar | floor (no-op backend), us "
                  "| mpiar over floor, us | `mpiar.allreduce`, us | floor + `mpiar.allreduce`, "
                  "us | mpiar without the pool, us | without / with |")
            print("|---|---|---|---|---|---|---|---|---|---|")
            for nbytes, (m, g, f, d, q) in rows:
                print(f"| {human(nbytes)} | {m:.1f} | {g:.1f} | {g / m:.2f} | {f:.2f} | "
                      f"{m - f:.1f} | {d:.1f} | {f + d:.1f} | {q:.1f} | {q / m:.2f} |",
                      flush=True)
        elif kind in ("all_reduce_coalesced", "all_gather_list", "reduce_scatter_list"):
            print(f"\n| {kind} | mpiar, us | gloo, us | gloo / mpiar | mpiar "
                  "without the pool, us | without / with |")
            print("|---|---|---|---|---|---|")
            for nbytes, (m, g, _, _, q) in rows:
                print(f"| {human(nbytes)} | {m:.1f} | {g:.1f} | {g / m:.2f} | {q:.1f} | "
                      f"{q / m:.2f} |", flush=True)
        else:
            print(f"\n| {kind} | mpiar, us | gloo, us | gloo / mpiar |")
            print("|---|---|---|---|")
            for nbytes, (m, g) in rows:
                print(f"| {human(nbytes)} | {m:.1f} | {g:.1f} | {g / m:.2f} |", flush=True)
    if args.ddp:
        nparams, med = bench_ddp(args.ddp_steps, args.width, gloo, noop, comm)
        if rank == 0:
            print(f"\nDDP step, CNN width {args.width} ({nparams} parameters, "
                  f"{nparams * 4 / 2**20:.2f} MiB of gradients), medians of {args.ddp_steps} "
                  f"steps: mpiar {med['mpiar'] * 1e3:.2f} ms, gloo {med['gloo'] * 1e3:.2f} ms, "
                  f"gloo / mpiar {med['gloo'] / med['mpiar']:.2f}; no-op backend (the "
                  f"computation alone) {med['noop'] * 1e3:.2f} ms, gloo / no-op "
                  f"{med['gloo'] / med['noop']:.2f} (the best ratio any backend can reach)")
    if rank == 0:
        print(f"# load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
