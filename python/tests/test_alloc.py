"""mpiar.alloc, mpiar.free, mpiar.collect: node-shared arrays, their zero-copy allreduce and
their collective lifetime (docs/python.md, "Node-shared arrays")."""

import gc

import numpy as np
import pytest
from mpi4py import MPI

import mpiar


def data(shape, dtype, rank, salt=0):
    n = int(np.prod(shape))
    x = np.sin(np.arange(n) * 0.37 + rank * 1.7 + salt) * (rank + 1)
    if np.dtype(dtype).kind == "i":
        x = x * 1000
    return x.astype(dtype).reshape(shape)


def alloc(shape, dtype="float32", like="numpy"):
    return mpiar.alloc(shape, dtype, like=like)


def test_alloc_aligned(rank):
    """The arrays start on a cache line whatever the MPI's placement of a window's segments
    (Open MPI 4.1 starts them 8 bytes past one)."""
    x = mpiar.alloc(3)
    assert x.shape == (3,) and x.ctypes.data % 64 == 0
    mpiar.free(x)


def same(a, b, size):
    """Bit for bit on two ranks and for integers; on more ranks the zero-copy path sums floats in
    the canonical order, which the MPI path's algorithm need not follow outside reproducible
    mode."""
    if size <= 2 or a.dtype.kind == "i":
        return a.tobytes() == b.tobytes()
    return np.allclose(a, b, rtol=1e-5, atol=1e-6)


def test_allreduce_on_shared_arrays(comm, rank, size):
    shape = (3, 1707)
    xs = mpiar.alloc((3, 2 * 1707), "float32")    # room for every dtype below
    ys = mpiar.alloc((3, 2 * 1707), "float32")
    assert isinstance(xs, np.ndarray) and xs.shape == (3, 2 * 1707) and xs.dtype == np.float32
    assert xs.flags.c_contiguous and xs.flags.writeable
    for dtype in ["float32", "float64", "int32"]:
        x = xs.reshape(-1).view(dtype)[:3 * 1707].reshape(shape)
        y = ys.reshape(-1).view(dtype)[:3 * 1707].reshape(shape)
        x[...] = data(shape, dtype, rank)
        ref = mpiar.allreduce(np.array(x))        # ordinary memory: the MPI path
        mpiar.allreduce(x, out=y)                 # shared: zero-copy
        assert same(y, ref, size), dtype
        mpiar.allreduce(x, out=x)                 # in place
        assert same(x, ref, size), dtype
        if dtype != "int32":
            x[...] = data(shape, dtype, rank, 1)
            ref = mpiar.allreduce(np.array(x), op="avg")
            mpiar.allreduce(x, op="avg", out=x)
            assert same(x, ref, size), dtype
    mpiar.free(xs)
    mpiar.free(ys)


def test_zero_copy_path_is_taken(comm, rank, size):
    """A rank on shared memory and the others on ordinary memory take different paths: the
    shared rank's call fails with MismatchError (it saw the others on the MPI path), which
    shows that shared arrays run zero-copy."""
    if size < 2:
        pytest.skip("needs two ranks")
    d = comm.Dup()
    x = mpiar.alloc(4096, "float32", comm=d)
    buf = x if rank == 0 else np.zeros(4096, dtype=np.float32)
    with pytest.raises(mpiar.Error) as e:
        mpiar.allreduce(buf, out=buf, comm=d, check=False, timeout_ms=30000)
    if rank == 0:
        assert isinstance(e.value, mpiar.MismatchError), e.value
    else:
        assert isinstance(e.value, (mpiar.CommBrokenError, mpiar.MismatchError)), e.value
    # The communicator is broken, so nothing can be freed on it collectively: the memory stays
    # until MPI_Finalize.
    del x, buf
    d.Free()


def live(comm=None):
    return set(mpiar._allocations_of(comm).live)


def test_lifetime(comm, rank, size):
    before = live()
    x = alloc(1000, "float64")
    mine = live() - before
    assert len(mine) == 1
    # Dropped on every rank: freed at the next collective point, not by the collector.
    del x
    gc.collect()
    assert live() - before == mine
    assert mpiar.collect() >= 1
    assert live() - before == set()

    # Dropped on the last rank only (the collector runs at different moments on different
    # ranks): nothing is freed, and no rank waits for another.
    x = alloc(100, "int64")
    mine = live() - before
    if rank == size - 1:
        del x
        gc.collect()
    mpiar.collect()
    assert live() - before == (mine if size > 1 else set())
    if rank != size - 1:
        del x
        gc.collect()
    mpiar.collect()
    assert live() - before == set()

    # An explicit free: now, through a view too (x must not be used afterwards).
    x = alloc(2048, "float32")
    view = x[10:20]
    mpiar.free(view)
    assert live() - before == set()
    del x, view
    # Dropped arrays of earlier tests are freed by now too.
    gc.collect()
    mpiar.collect()
    assert live() == set()


def test_free_errors(comm, rank, size):
    x = alloc(64, "float32")
    with pytest.raises((ValueError, mpiar.MismatchError)) as e:
        mpiar.free(np.zeros(3) if rank == 0 else x)
    assert isinstance(e.value, ValueError if rank == 0 else mpiar.MismatchError)
    with pytest.raises((TypeError, mpiar.MismatchError)) as e:
        mpiar.free(object() if rank == 0 else x)
    assert isinstance(e.value, TypeError if rank == 0 else mpiar.MismatchError)
    if size > 1:
        y = alloc(64, "float32")
        with pytest.raises(mpiar.MismatchError):
            mpiar.free(x if rank == 0 else y)     # different allocations
        mpiar.free(y)
    mpiar.free(x)
    with pytest.raises(ValueError):
        mpiar.free(x)                             # already freed: refused on every rank


def test_alloc_errors(rank, size):
    with pytest.raises((ValueError, mpiar.Error)) as e:
        alloc(-1 if rank == 0 else 10, "float32")
    assert isinstance(e.value, ValueError if rank == 0 else mpiar.Error)
    with pytest.raises((TypeError, mpiar.Error)) as e:
        alloc(10, "not-a-dtype" if rank == size - 1 else "float32")
    with pytest.raises(ValueError):
        alloc(10, like="cupy")
    empty = alloc(0, "float32")
    assert empty.shape == (0,)
    mpiar.free(empty)
