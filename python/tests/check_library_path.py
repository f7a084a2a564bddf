"""The package loads its own build of the library, whatever LD_LIBRARY_PATH names first.

Run with LD_LIBRARY_PATH set to the directory of a libmpiar.so.0 built with another MPI (the
environment of a C program of the project's main build): importing mpiar must still work, and
no libmpiar from that directory may be mapped into the process."""

import os

import numpy as np
from mpi4py import MPI

import mpiar

dirs = [os.path.realpath(d) for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
assert dirs, "LD_LIBRARY_PATH is not set: nothing to check"
with open("/proc/self/maps") as f:
    mapped = {line.split()[-1] for line in f if "libmpiar" in line}
foreign = [m for m in mapped if os.path.dirname(os.path.realpath(m)) in dirs]
assert not foreign, f"a libmpiar from LD_LIBRARY_PATH was loaded: {foreign}"
x = np.array([MPI.COMM_WORLD.Get_rank() + 1], dtype=np.int64)
size = MPI.COMM_WORLD.Get_size()
assert mpiar.allreduce(x)[0] == size * (size + 1) // 2
print(f"ok: mpiar imported with LD_LIBRARY_PATH={os.environ['LD_LIBRARY_PATH']} "
      f"(mapped: {sorted(mapped) or 'none, the library is part of the extension'})")
