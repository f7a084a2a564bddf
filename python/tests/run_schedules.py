"""The examples' schedule files (written by test_schedule.py into DIR) run under MPI at every
p = 2 .. the launch's size, each on a communicator of the first p ranks:
mpiar.allreduce(algorithm="file:DIR/NAME_pP.sched") against NumPy's sum (int32 exactly, float32
within rounding), out of place and in place."""
import os
import sys

import numpy as np
from mpi4py import MPI

import mpiar

world = MPI.COMM_WORLD
directory = sys.argv[1]
failures = runs = 0
for p in range(2, world.Get_size() + 1):
    comm = world.Split(0 if world.Get_rank() < p else MPI.UNDEFINED, world.Get_rank())
    if comm == MPI.COMM_NULL:
        continue
    rank = comm.Get_rank()
    for name in ("ring", "recursive_doubling", "bidirectional_ring"):
        alg = "file:" + os.path.join(directory, "%s_p%d.sched" % (name, p))
        for count in (2 * p, 2 * p * 64):  # every example's chunks (1, p or 2p) divide these
            x = (np.arange(count, dtype=np.int32) * (rank + 1)) % 1000
            want = sum((np.arange(count, dtype=np.int64) * (r + 1)) % 1000 for r in range(p))
            got = mpiar.allreduce(x, algorithm=alg, comm=comm)
            y = x.copy()
            mpiar.allreduce(y, out=y, algorithm=alg, comm=comm)
            f = (np.arange(count, dtype=np.float32) + rank) / 7
            fwant = sum((np.arange(count, dtype=np.float64) + r) / 7 for r in range(p))
            fgot = mpiar.allreduce(f, algorithm=alg, comm=comm)
            runs += 1
            if not (np.array_equal(got, want) and np.array_equal(y, want) and
                    np.allclose(fgot, fwant, rtol=1e-5)):
                failures += 1
                print("rank %d: %s count %d: wrong result" % (rank, alg, count), flush=True)
    comm.Free()
total = world.allreduce(failures)
if world.Get_rank() == 0:
    print("%s: %d runs of the examples' files at p = 2..%d, %d wrong" %
          ("ok" if total == 0 else "FAIL", runs, world.Get_size(), total))
sys.exit(1 if total else 0)
