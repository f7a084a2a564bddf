"""One allreduce through the mpiar Python package (Open MPI, mpi4py's MPI) on every rank.

Each rank prints "rank R of P on HOST: allreduce ok" (or WRONG, and exits with 1).
"""
import sys

import numpy as np
from mpi4py import MPI

import mpiar

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
x = np.full(1 << 16, rank + 1, dtype=np.float32)
y = mpiar.allreduce(x)
ok = bool((y == size * (size + 1) / 2).all())
print(f"rank {rank} of {size} on {MPI.Get_processor_name()}: allreduce {'ok' if ok else 'WRONG'}",
      flush=True)
sys.exit(0 if ok else 1)
