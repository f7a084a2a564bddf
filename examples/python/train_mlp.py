#!/usr/bin/env python3
"""Data-parallel training of a small MLP with mpiar and PyTorch (CPU).

Every rank holds the whole model. Each step takes a global batch of B samples of a
deterministic synthetic data set; rank r computes the loss and gradient of its B/p of them, and
mpiar.torch.DistributedOptimizer averages the gradients over the ranks before the SGD step: its
gradient hooks start the averaging of each bucket of gradients during the backward pass, and
step() waits for them (--no-overlap: step() averages them all in one fused pushpull). The
average of equal shards' mean gradients is the mean gradient of the global batch, so p ranks
follow the 1-rank run with the same global batch up to float rounding, and every rank ends with
the same parameters, bit for bit.

    mpiexec.openmpi -n 2 /usr/bin/python3 examples/python/train_mlp.py
        [--steps 40] [--global-batch 64] [--hidden 64]
        [--write curve.txt | --compare curve.txt]
        [--stop-after K --checkpoint FILE] [--resume FILE]
        [--backend mpiar|gloo] [--no-overlap] [--bucket-bytes N] [--time]

--write saves the loss curve; --compare checks this run's curve against a saved one (relative
tolerance 1e-5) and fails otherwise. --stop-after K saves a checkpoint after K steps and stops;
--resume continues from it in a new job (worker 0 reads the file; mpiar.torch broadcasts the
model and the optimizer state). --backend gloo averages the gradients with torch.distributed's
gloo backend instead (one all_reduce of all gradients, as mpiar's fused pushpull), for timing.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
from mpi4py import MPI

import mpiar
import mpiar.torch

FEATURES = 16
SAMPLES = 1024


def make_data():
    """A fixed regression problem: inputs, and targets from a fixed random 'teacher' network."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    w1 = torch.randn(FEATURES, 32, generator=g) / FEATURES ** 0.5
    w2 = torch.randn(32, 1, generator=g) / 32 ** 0.5
    y = torch.tanh(x @ w1) @ w2 + 0.1 * torch.sin(3 * x[:, :1])
    order = torch.randperm(SAMPLES, generator=g)
    return x, y, order


def make_model(hidden, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, hidden), torch.nn.Tanh(),
        torch.nn.Linear(hidden, hidden), torch.nn.Tanh(),
        torch.nn.Linear(hidden, 1))


def local_rows(order, step, global_batch, rank, size):
    """This rank's share of the global batch of a step."""
    start = (step * global_batch) % SAMPLES
    rows = order[start:start + global_batch]
    share = global_batch // size
    return rows[rank * share:(rank + 1) * share]


def parameters_identical(model, comm):
    """Whether every rank holds the same parameter bits (max and min of the bits agree)."""
    with torch.no_grad():
        bits = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).view(torch.int32)
        hi = mpiar.allreduce(bits, op="max", comm=comm)
        lo = mpiar.allreduce(bits, op="min", comm=comm)
    return bool(torch.equal(hi, bits) and torch.equal(lo, bits))


class GlooAverager:
    """Gradient averaging with torch.distributed (gloo): one all_reduce of all gradients."""

    def __init__(self, comm, port):
        import torch.distributed as dist
        self.dist = dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(port))
        dist.init_process_group("gloo", rank=comm.Get_rank(), world_size=comm.Get_size())
        self.size = comm.Get_size()

    def average(self, params):
        grads = [p.grad for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        self.dist.all_reduce(flat)
        flat /= self.size
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()


def save_checkpoint(path, step, model, opt):
    tmp = path + ".tmp"
    torch.save({"step": step, "model": model.state_dict(), "optimizer": opt.state_dict()}, tmp)
    os.replace(tmp, path)


def resume(path, model, opt, comm):
    """Worker 0 reads the checkpoint; everyone gets its model, optimizer state and step."""
    step = np.zeros(1, dtype=np.int64)
    if comm.Get_rank() == 0:
        ckpt = torch.load(path, map_location="cpu")
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        step[0] = ckpt["step"]
    mpiar.bcast(step, comm=comm)
    mpiar.torch.broadcast_parameters(model.state_dict(), root=0, comm=comm)
    mpiar.torch.broadcast_optimizer_state(opt, root=0, comm=comm)
    return int(step[0])


def compare(curve, path, rtol=1e-5):
    ref = {}
    with open(path) as f:
        for line in f:
            s, loss = line.split()
            ref[int(s)] = float(loss)
    worst = 0.0
    for step, loss in curve:
        if step not in ref:
            raise SystemExit(f"compare: step {step} is not in {path}")
        worst = max(worst, abs(loss - ref[step]) / abs(ref[step]))
    print(f"loss curve vs {path}: largest relative difference {worst:.3g} over {len(curve)} steps")
    return worst <= rtol


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--global-batch", type=int, default=64)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--write")
    p.add_argument("--compare")
    p.add_argument("--stop-after", type=int)
    p.add_argument("--checkpoint")
    p.add_argument("--resume")
    p.add_argument("--backend", choices=["mpiar", "gloo"], default="mpiar")
    p.add_argument("--no-overlap", action="store_true",
                   help="average all gradients in step() (one fused pushpull), not from hooks")
    p.add_argument("--bucket-bytes", type=int,
                   help="bucket size of the hook-driven averaging (default: the optimizer's)")
    p.add_argument("--gloo-port", type=int, default=29517)
    p.add_argument("--time", action="store_true", help="print the median step time")
    p.add_argument("--expect-ranks", type=int,
                   help="fail unless the job has this many ranks (a launcher of another MPI "
                        "starts singletons)")
    a = p.parse_args(argv)
    if a.stop_after is not None and not a.checkpoint:
        p.error("--stop-after needs --checkpoint")
    return a


def main(argv=None):
    args = parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if args.expect_ranks is not None and size != args.expect_ranks:
        raise SystemExit(f"this process sees {size} of the {args.expect_ranks} ranks it was "
                         "launched with: the launcher does not belong to mpi4py's MPI")
    if args.global_batch % size:
        raise SystemExit(f"the global batch {args.global_batch} must divide among {size} ranks")
    torch.set_num_threads(1)
    x, y, order = make_data()

    # Each rank starts from its own random weights; worker 0's become everyone's.
    model = make_model(args.hidden, seed=1000 + rank)
    mpiar.torch.broadcast_parameters(model.state_dict(), root=0, comm=comm)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    gloo = None
    if args.backend == "mpiar":
        opt = mpiar.torch.DistributedOptimizer(opt, model.named_parameters(), comm=comm,
                                               overlap=not args.no_overlap,
                                               bucket_bytes=args.bucket_bytes)
    else:
        gloo = GlooAverager(comm, args.gloo_port)
    first = resume(args.resume, model, opt, comm) if args.resume else 0
    last = args.steps if args.stop_after is None else min(args.steps, args.stop_after)

    curve, times = [], []
    loss_fn = torch.nn.MSELoss()
    for step in range(first, last):
        rows = local_rows(order, step, args.global_batch, rank, size)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x[rows]), y[rows])
        loss.backward()
        if gloo is not None:
            gloo.average(list(model.parameters()))
        opt.step()
        times.append(time.perf_counter() - t0)
        # The global batch's loss: the mean of the ranks' equal shares.
        g = mpiar.allreduce(np.array([loss.item()]), op="avg", comm=comm)
        curve.append((step, float(g[0])))

    ok = parameters_identical(model, comm)
    if rank == 0:
        if curve:
            print(f"{size} rank(s), steps {first}..{last - 1}: loss {curve[0][1]:.6f} -> "
                  f"{curve[-1][1]:.6f}")
        print("parameters identical on every rank" if ok else "parameters DIFFER between ranks")
        if args.time and times:
            print(f"median step time ({args.backend}): {1e3 * float(np.median(times)):.3f} ms")
    if args.stop_after is not None and rank == 0:
        save_checkpoint(args.checkpoint, last, model, opt)
        print(f"checkpoint after {last} steps: {args.checkpoint}")
    if args.write and rank == 0:
        with open(args.write, "w") as f:
            for step, loss in curve:
                f.write(f"{step} {loss!r}\n")
    if args.compare and rank == 0:
        ok = compare(curve, args.compare) and ok
    verdict = np.array([1 if ok else 0], dtype=np.int32)
    mpiar.bcast(verdict, root=0, comm=comm)
    ok = bool(verdict[0])
    if gloo is not None:
        gloo.dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
