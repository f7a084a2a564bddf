"""Fixtures of the mpiar Python tests. Every test runs on every rank (pytest under mpiexec),
so each test is a collective: the ranks run the same tests in the same order."""

import sys

import numpy as np
import pytest
from mpi4py import MPI

import mpiar


@pytest.fixture(scope="session")
def comm():
    return MPI.COMM_WORLD


@pytest.fixture(scope="session")
def rank(comm):
    return comm.Get_rank()


@pytest.fixture(scope="session")
def size(comm):
    return comm.Get_size()


@pytest.fixture
def shared_dir(comm, tmp_path):
    """A directory every rank names the same way (rank 0's temporary directory)."""
    return comm.bcast(str(tmp_path), root=0)


@pytest.fixture(autouse=True)
def still_usable(comm):
    """After every test (also one that provoked errors), MPI_COMM_WORLD still reduces correctly."""
    yield
    x = np.array([comm.Get_rank() + 1], dtype=np.int64)
    assert mpiar.allreduce(x)[0] == comm.Get_size() * (comm.Get_size() + 1) // 2


# A failing test on one rank must not leave the others waiting forever: pytest stops the rank at
# its first failure (-x), and MPI_Finalize would then wait for ranks still inside a collective.
# So a failed session ends the whole job with MPI_Abort, after pytest printed its report.
_failed = []


def pytest_sessionfinish(session, exitstatus):
    _failed.append(exitstatus not in (0, 5))


def pytest_unconfigure(config):
    if _failed and _failed[0] and MPI.COMM_WORLD.Get_size() > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
