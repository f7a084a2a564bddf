"""Nonblocking and persistent operations: mpiar.iallreduce / ibcast / allreduce_init /
bcast_init, the Request object (wait, test, done, free, with), waitall / waitany / testany,
errors at completion, dropped requests, and the arrays a request keeps alive."""

import gc
import threading
import time
import warnings
import weakref

import numpy as np
import pytest
from mpi4py import MPI

import mpiar

need_two = pytest.mark.skipif(MPI.COMM_WORLD.Get_size() < 2, reason="needs 2 ranks")


def tri(size):
    return size * (size + 1) // 2


def test_wait_returns_the_output(rank, size):
    x = np.arange(12, dtype=np.float64).reshape(3, 4) * (rank + 1)
    req = mpiar.iallreduce(x)
    assert isinstance(req, mpiar.Request) and not req.persistent
    y = req.wait()
    assert req.done and isinstance(y, np.ndarray) and y.shape == (3, 4)
    np.testing.assert_array_equal(y, np.arange(12.0).reshape(3, 4) * tri(size))
    assert req.wait() is y and req.test() is True  # completed: both return at once
    out = np.empty((3, 4))
    assert mpiar.iallreduce(x, op="max", out=out).wait() is out
    np.testing.assert_array_equal(out, np.arange(12.0).reshape(3, 4) * size)
    assert mpiar.iallreduce(x, out=x, check=False).wait() is x
    np.testing.assert_array_equal(x, y)
    assert "done" in repr(req)


def test_test_loop(rank, size):
    x = np.full(1 << 16, rank + 1, dtype=np.int64)
    req = mpiar.iallreduce(x, out=x)
    polls = 0
    while not req.test():
        polls += 1
    assert req.done and req.test()
    assert (x == tri(size)).all()


def test_out_of_order_completion(rank, size):
    """Several operations of one communicator outstanding at once, of very different sizes and
    kinds, completed in the reverse of their start order (and by test loops)."""
    sizes = [1, 3000, 1 << 18, 7]
    xs = [np.full(n, float(rank + 1 + k), dtype=np.float32) for k, n in enumerate(sizes)]
    b = np.full(5, rank, dtype=np.int32)
    reqs = [mpiar.iallreduce(x, out=x, check=False) for x in xs]
    reqs.insert(2, mpiar.ibcast(b, root=size - 1, check=False))
    assert not any(r.done for r in reqs)  # done only once a test or wait saw it complete
    for r in reversed(reqs):
        r.wait()
    for k, x in enumerate(xs):
        assert (x == tri(size) + k * size).all()
    assert (b == size - 1).all()
    # Test loops over a mixed set until all are done.
    xs = [np.full(n, rank + 1, dtype=np.int64) for n in (10, 100000, 1)]
    reqs = [mpiar.iallreduce(x, out=x) for x in xs]
    while not all([r.test() for r in reqs]):
        pass
    assert all((x == tri(size)).all() for x in xs)


def test_waitall_waitany_testany(rank, size):
    xs = [np.full(4, i + rank, dtype=np.int64) for i in range(5)]
    reqs = [mpiar.iallreduce(x) for x in xs]
    results = mpiar.waitall(reqs)
    assert all(r.done for r in reqs)
    for i, y in enumerate(results):
        assert y.tolist() == [i * size + size * (size - 1) // 2] * 4
    assert mpiar.waitall([]) == [] and len(mpiar.waitall(reqs)) == 5

    reqs = [mpiar.iallreduce(np.full(1000 * (i + 1), 1.0)) for i in range(4)]
    seen = set()
    pending = list(range(4))
    while pending:
        k = mpiar.waitany([reqs[i] for i in pending])
        i = pending.pop(k)
        assert reqs[i].done and (reqs[i].wait() == size).all()
        seen.add(i)
    assert seen == {0, 1, 2, 3}

    reqs = [mpiar.iallreduce(np.ones(8)) for _ in range(3)]
    found = None
    while found is None:
        found = mpiar.testany(reqs)
    assert reqs[found].done
    mpiar.waitall(reqs)
    assert mpiar.testany(reqs) == 0 and mpiar.waitany(reqs) == 0

    with pytest.raises(ValueError, match="empty"):
        mpiar.waitany([])
    with pytest.raises(TypeError, match="not an mpiar.Request"):
        mpiar.waitall([reqs[0], "x"])
    with pytest.raises(ValueError, match="twice"):
        mpiar.waitall([reqs[0], reqs[0]])


def test_bcast_forms(rank, size):
    x = np.full(6, rank, dtype=np.int32)
    assert mpiar.ibcast(x, root=size - 1).wait() is x
    assert (x == size - 1).all()
    y = np.full(3, rank, dtype=np.float64)
    with mpiar.bcast_init(y, root=0) as p:
        for step in range(3):
            if rank == 0:
                y[:] = step
            p.start()
            assert p.wait() is y and (y == step).all()


def test_persistent_allreduce(rank, size):
    x = np.zeros(10, dtype=np.float64)
    p = mpiar.allreduce_init(x, op="sum")
    assert p.persistent and p.done  # inactive until started
    for step in range(4):
        x[:] = np.arange(10) * (rank + step)
        p.start()
        assert not p.done
        y = p.wait()
        np.testing.assert_array_equal(y, np.arange(10) * (size * step + size * (size - 1) // 2))
    assert p.wait() is y  # the same output array every run
    with pytest.raises(ValueError, match="not a persistent"):
        mpiar.iallreduce(x).start()
    p.start()
    with pytest.raises(ValueError, match="active"):
        p.start()
    p.free()  # completes the active run first
    np.testing.assert_array_equal(y, np.arange(10) * (size * 3 + size * (size - 1) // 2))
    with pytest.raises(ValueError, match="freed"):
        p.start()

    # A non-contiguous input is copied again at every start.
    base = np.zeros((4, 6), dtype=np.int32)
    view = base[:, ::2]
    with mpiar.allreduce_init(view) as p:
        for step in range(3):
            base[:] = step + rank
            p.start()
            out = p.wait()
            assert out.shape == (4, 3) and (out == size * step + size * (size - 1) // 2).all()


def test_errors_at_start_and_at_wait(comm, rank, size):
    # Local argument errors are raised by the call that would start the operation.
    with pytest.raises(mpiar.BadDtypeOpError):
        mpiar.iallreduce(np.ones(3, np.int32), op="avg")
    with pytest.raises(TypeError):
        mpiar.iallreduce("not an array")
    if size > 1:
        # With the check, differing arguments are a MismatchError before anything starts.
        with pytest.raises(mpiar.MismatchError, match="element count"):
            mpiar.iallreduce(np.ones(3 + rank))
    if size < 2:
        return
    # A failure during communication is raised at completion: rank 0 gives up waiting for a
    # rank that comes too late. Ranks 0 and 1 only (a broken context of more ranks takes seconds
    # to drain when it is freed).
    dup = comm.Split(0 if rank < 2 else MPI.UNDEFINED, rank)
    if dup == MPI.COMM_NULL:
        comm.Barrier()
        return
    x = np.ones(4)
    mpiar.allreduce(x, comm=dup)
    try:
        if rank == 0:
            req = mpiar.iallreduce(x, comm=dup, timeout_ms=200, check=False)
            with pytest.raises(mpiar.TimeoutError) as info:
                req.wait()
            assert str(info.value).startswith("mpiar.iallreduce") and info.value.detail
            assert req.done
            with pytest.raises(mpiar.TimeoutError):
                req.wait()  # the error stays
            with pytest.raises(mpiar.TimeoutError):
                req.test()
            with pytest.raises(mpiar.TimeoutError):
                mpiar.waitall([req])
            req2 = None
            try:
                req2 = mpiar.iallreduce(x, comm=dup, check=False)
            except mpiar.CommBrokenError:
                pass
            if req2 is not None:
                with pytest.raises(mpiar.CommBrokenError):
                    req2.wait()
        else:
            time.sleep(0.6)
            try:
                req = mpiar.iallreduce(x, comm=dup, timeout_ms=200, check=False)
                while not req.test():
                    pass
            except (mpiar.CommBrokenError, mpiar.TimeoutError):
                pass
    finally:
        comm.Barrier()
        dup.Free()


def test_dropped_active_request_is_completed(rank, size):
    x = np.full(1000, rank + 1.0)
    with pytest.warns(ResourceWarning, match="dropped"):
        mpiar.iallreduce(x, out=x, check=False)  # the request goes at once: waited for
    assert (x == tri(size)).all()
    y = np.full(10, 1, dtype=np.int64)
    req = mpiar.iallreduce(y, out=y)
    with pytest.warns(ResourceWarning):
        del req
        gc.collect()
    assert (y == size).all()
    # A completed request goes silently.
    req = mpiar.iallreduce(y, out=y)
    req.wait()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        del req
        gc.collect()
    assert not [w for w in record if issubclass(w.category, ResourceWarning)]


def test_arrays_stay_alive_until_completion(rank, size):
    x = np.full(1 << 15, rank + 1.0)
    alive = weakref.ref(x)
    req = mpiar.iallreduce(x)  # the input is only read: released once the operation is done
    del x
    gc.collect()
    junk = [np.full(1 << 15, -1.0) for _ in range(4)]  # memory that could reuse x's
    assert alive() is not None
    y = req.wait()
    assert (y == tri(size)).all()
    del junk
    gc.collect()
    assert alive() is None  # released by the completion

    # A non-contiguous input is copied, and the copy is kept: the original may go at once.
    base = np.arange(40, dtype=np.float64).reshape(4, 10) * (rank + 1)
    req = mpiar.iallreduce(base[:, ::3])
    del base
    gc.collect()
    np.testing.assert_array_equal(req.wait(), np.arange(40.0).reshape(4, 10)[:, ::3] * tri(size))

    # A buffer stays exported while the operation runs: a bytearray cannot be resized.
    buf = bytearray(np.full(64, rank + 1, dtype=np.uint8).tobytes())
    req = mpiar.iallreduce(buf, out=buf, op="max")
    with pytest.raises(BufferError):
        buf.extend(b"x")
    req.wait()
    buf.extend(b"x")  # released once complete
    assert buf[:64] == bytes([size]) * 64


def test_request_from_a_thread(rank, size):
    """wait() releases the GIL: another thread runs Python meanwhile; a request is used by one
    thread at a time."""
    x = np.full(1 << 16, 1.0)
    req = mpiar.iallreduce(x, out=x)
    result = []
    t = threading.Thread(target=lambda: result.append(req.wait()))
    t.start()
    t.join()
    assert result[0] is x and (x == size).all()
