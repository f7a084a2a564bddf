"""Data-parallel training of a small CNN with torch's DistributedDataParallel, on the mpiar
backend or on gloo: the training code is torch's own; only the backend's name changes.

    mpiexec.openmpi -n 2 /usr/bin/python3 examples/python/ddp_train.py --backend mpiar
    mpiexec.openmpi -n 2 /usr/bin/python3 examples/python/ddp_train.py --backend gloo
    mpiexec.openmpi -n 2 /usr/bin/python3 examples/python/ddp_train.py --backend mpiar --zero

Both print the same losses (the mean over the ranks of each step's loss). The data set is
synthetic and deterministic (no download): 10 classes of 16x16 images, each a class pattern plus
noise; every step takes a global batch of 64 images, of which each rank trains on its share.
``--zero`` shards the optimizer's state with ZeroRedundancyOptimizer. ``--write FILE`` saves the
losses, ``--compare FILE`` checks them against a saved run (relative 1e-5, or bit for bit with
``--exact``). ``import mpiar.torch`` registers the backend; under mpiexec, without MASTER_ADDR
and friends, rank and size come from MPI for either backend.
"""

import argparse
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

import mpiar.torch  # noqa: F401  (registers the "mpiar" backend)


class CNN(torch.nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(width, 2 * width, 3, padding=1)
        self.fc1 = torch.nn.Linear(2 * width * 4 * 4, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def batch(step, global_batch=64):
    """The step's global batch, the same on every rank and in every run."""
    g = torch.Generator().manual_seed(12345 + step)
    patterns = torch.Generator().manual_seed(99)
    proto = torch.randn(10, 1, 16, 16, generator=patterns)
    y = torch.randint(0, 10, (global_batch,), generator=g)
    x = proto[y] + 0.5 * torch.randn(global_batch, 1, 16, 16, generator=g)
    return x, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="mpiar", choices=["mpiar", "gloo"])
    ap.add_argument("--zero", action="store_true", help="ZeroRedundancyOptimizer")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--algorithm", default=None, help="mpiar's allreduce algorithm")
    ap.add_argument("--write", metavar="FILE")
    ap.add_argument("--compare", metavar="FILE")
    ap.add_argument("--exact", action="store_true", help="--compare bit for bit")
    args = ap.parse_args()

    torch.set_num_threads(1)
    options = {"algorithm": args.algorithm} if args.backend == "mpiar" and args.algorithm else None
    dist.init_process_group(args.backend, pg_options=options)
    rank, size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = CNN(args.width)
    ddp = DDP(model)
    if args.zero:
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.SGD, lr=0.05,
                                      momentum=0.9)
    else:
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)

    losses = []
    for step in range(args.steps):
        x, y = batch(step)
        share = x.shape[0] // size
        xs, ys = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        opt.zero_grad()
        loss = F.cross_entropy(ddp(xs), ys)
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / size)
        if rank == 0:
            print(f"step {step:3d}  loss {losses[-1]:.7f}", flush=True)

    # Every rank ends with the same parameters.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    first = flat.clone()
    dist.broadcast(first, 0)
    if not torch.equal(flat, first):
        print(f"rank {rank}: parameters differ from rank 0's", file=sys.stderr)
        sys.exit(1)

    if rank == 0 and args.write:
        with open(args.write, "w") as f:
            f.write("".join(f"{v!r}\n" for v in losses))
    if args.compare:
        with open(args.compare) as f:
            ref = [float(line) for line in f if line.strip()]
        if len(ref) != len(losses):
            print(f"{args.compare} has {len(ref)} steps, this run {len(losses)}", file=sys.stderr)
            sys.exit(1)
        worst = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses, ref))
        bad = any(a != b for a, b in zip(losses, ref)) if args.exact else worst > 1e-5
        if rank == 0:
            print(f"largest relative difference from {args.compare}: {worst:.3g}"
                  f"{' (bit for bit required)' if args.exact else ''}")
        if bad:
            sys.exit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
