"""The ranks see each other. A launcher of another MPI starts each process as a singleton
(MPI_COMM_WORLD of size 1), which would pass every other test p times over; this one fails then.
Also runnable as a script (python test_world.py) for a check without pytest."""

import os

import numpy as np
from mpi4py import MPI

import mpiar


def check_world():
    expected = os.environ.get("MPIAR_TEST_NP")
    if expected is None:
        raise SystemExit("MPIAR_TEST_NP is not set: the number of ranks the test was launched with")
    size = MPI.COMM_WORLD.Get_size()
    assert size == int(expected), (
        f"this process sees {size} of the {expected} ranks it was launched with: the launcher "
        f"does not belong to mpi4py's MPI ({MPI.Get_library_version().splitlines()[0]})")
    return size


def test_ranks_see_each_other():
    size = check_world()
    # And they talk: the sum of the ranks' numbers.
    x = np.array([MPI.COMM_WORLD.Get_rank()], dtype=np.int64)
    assert mpiar.allreduce(x)[0] == size * (size - 1) // 2


def test_the_module_uses_mpi4pys_mpi():
    vendor, version = MPI.get_vendor()
    assert mpiar.build_info["mpi_vendor"] == vendor
    assert mpiar.build_info["mpi_version"][0] == version[0]


if __name__ == "__main__":
    check_world()
    test_ranks_see_each_other()
    print("ok: the ranks see each other")
