"""mpiar.KVStore: init, pushpull (one key and fused lists), broadcast, step with SGD,
checkpoints, and its errors, with NumPy arrays."""

import os
import weakref

import numpy as np
import pytest
from mpi4py import MPI

import mpiar

need_two = pytest.mark.skipif(MPI.COMM_WORLD.Get_size() < 2, reason="needs 2 ranks")


@pytest.fixture
def kv():
    store = mpiar.KVStore()
    yield store
    store.close()


def test_properties(kv, rank, size):
    assert kv.rank == rank and kv.num_workers == size
    if "MPIAR_FUSION_BYTES" not in os.environ:
        assert kv.fusion_bytes == 64 << 20
    with mpiar.KVStore(fusion_bytes=4096, op="sum") as small:
        assert small.fusion_bytes == 4096
    assert small.closed
    with pytest.raises(ValueError, match="closed"):
        small.barrier()


def test_init_gives_worker_0s_value(kv, rank):
    w = np.full((2, 3), rank + 1.0, dtype=np.float32)
    kv.init("w", w)
    np.testing.assert_array_equal(w, np.ones((2, 3)))
    ids = [np.full(4, rank, np.int64), np.full(1, rank, np.int32)]
    kv.init([3, 4], ids)
    assert ids[0].tolist() == [0] * 4 and ids[1].tolist() == [0]
    np.testing.assert_array_equal(kv.value("w"), np.ones((2, 3)))
    assert kv.value("w").shape == (2, 3) and kv.value(3).dtype == np.int64


def test_pushpull_averages(kv, rank, size):
    kv.init("g", np.zeros(10, np.float64))
    g = np.arange(10.0) * (rank + 1)
    assert kv.pushpull("g", g) is g  # in place
    np.testing.assert_allclose(g, np.arange(10.0) * (size + 1) / 2)
    out = np.empty(10)
    src = np.full(10, float(rank))
    assert kv.pushpull("g", src, out=out) is out
    np.testing.assert_allclose(out, np.full(10, (size - 1) / 2))
    np.testing.assert_array_equal(src, np.full(10, float(rank)))


def test_sum_store_and_int_keys(rank, size):
    with mpiar.KVStore(op="sum") as kv:
        kv.init(7, np.zeros(3, np.int32))
        x = np.full(3, rank, np.int32)
        kv.pushpull(7, x)
        assert x.tolist() == [size * (size - 1) // 2] * 3


def test_fused_list_equals_per_key(rank, size):
    rng = np.random.default_rng(rank)
    shapes = [(5,), (3, 4), (1000,), (2, 2, 2), (0,), (70000,)]
    vals = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    names = [f"t{i}" for i in range(len(shapes))]
    with mpiar.KVStore(fusion_bytes=16 << 10) as kv:
        kv.init(names, [np.zeros(s, np.float32) for s in shapes])
        single = [kv.pushpull(n, v.copy()) for n, v in zip(names, vals)]
        outs = [np.empty_like(v) for v in vals]
        assert kv.pushpull(names, vals, out=outs) is outs
        for a, b in zip(single, outs):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
        fused = [v.copy() for v in vals]
        kv.pushpull(names, fused)
        for a, b in zip(single, fused):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    ref = np.stack([np.random.default_rng(r).standard_normal(5).astype(np.float32)
                    for r in range(size)]).mean(axis=0)
    np.testing.assert_allclose(single[0], ref, rtol=1e-5)


def test_non_contiguous_value_with_out(kv, rank, size):
    kv.init("m", np.zeros((4, 3)))
    base = np.arange(24.0).reshape(4, 6) * (rank + 1)
    out = np.empty((4, 3))
    kv.pushpull("m", base[:, ::2], out=out)
    np.testing.assert_allclose(out, np.arange(24.0).reshape(4, 6)[:, ::2] * (size + 1) / 2)


def test_broadcast(kv, rank, size):
    kv.init("b", np.zeros(6, np.float32))
    v = np.full(6, rank, np.float32)
    assert kv.broadcast("b", v, root=size - 1) is v
    np.testing.assert_array_equal(v, np.full(6, size - 1))
    np.testing.assert_array_equal(kv.value("b"), np.full(6, size - 1))


def test_push_and_pull_do_not_exist(kv):
    kv.init(1, np.zeros(2))
    with pytest.raises(NotImplementedError, match="use pushpull") as info:
        kv.push(1, np.zeros(2))
    assert isinstance(info.value, mpiar.UnsupportedError)
    assert "no push/pull" in info.value.detail
    with pytest.raises(mpiar.UnsupportedError, match="use pushpull"):
        kv.pull(1, out=np.zeros(2))


def test_step_with_sgd(kv, rank, size):
    w0 = np.linspace(-1, 1, 8)
    kv.init("w", w0.copy())
    with pytest.raises(mpiar.UnsupportedError, match="optimizer"):
        kv.step("w", np.zeros(8))
    kv.set_optimizer(mpiar.SGD(0.5, momentum=0.9, weight_decay=0.01))
    grads = [np.full(8, float(r + 1)) for r in range(size)]
    mean = np.mean(grads, axis=0)
    w, m = w0.copy(), np.zeros(8)
    for _ in range(3):
        g = grads[rank].copy()
        assert kv.step("w", g) is g
        np.testing.assert_allclose(g, mean)
        m = 0.9 * m - 0.5 * (mean + 0.01 * w)
        w = w + m
    np.testing.assert_allclose(kv.value("w"), w, rtol=1e-12)
    out = np.empty(8)
    assert kv.value("w", out=out) is out
    kv.set_optimizer(None)


def test_save_and_load(kv, rank, shared_dir):
    path = os.path.join(shared_dir, "store.ckpt")
    kv.init(["a", 2], [np.arange(5.0), np.arange(3, dtype=np.int32)])
    kv.save(path)
    assert os.path.exists(path)
    kv.broadcast("a", np.full(5, 9.0))
    kv.load(path)
    np.testing.assert_array_equal(kv.value("a"), np.arange(5.0))
    with pytest.raises(mpiar.IoError):
        kv.load(os.path.join(shared_dir, "missing.ckpt"))
    if rank == 0:
        with open(path, "r+b") as f:
            f.seek(40)
            byte = f.read(1)
            f.seek(40)
            f.write(bytes([byte[0] ^ 0xFF]))
    MPI.COMM_WORLD.Barrier()
    with pytest.raises(mpiar.CorruptError):
        kv.load(path)
    np.testing.assert_array_equal(kv.value("a"), np.arange(5.0))


def test_errors(kv, rank):
    kv.init("f", np.zeros(4, np.float32))
    with pytest.raises(mpiar.KeyUnknownError):
        kv.pushpull("nope", np.zeros(4, np.float32))
    with pytest.raises(mpiar.KeyExistsError):
        kv.init("f", np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="int or a str"):
        kv.pushpull(1.5, np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="has dtype float64; the key holds float32"):
        kv.pushpull("f", np.zeros(4))
    with pytest.raises(ValueError, match="has 5 elements; the key holds 4"):
        kv.pushpull("f", np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="2 keys but 1 values"):
        kv.pushpull(["f", "f"], [np.zeros(4, np.float32)])
    with pytest.raises(TypeError, match="no bool keys"):
        kv.init("b", np.zeros(3, bool))
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        kv.pushpull("f", ro)
    with pytest.raises(ValueError, match="op must be 'sum' or 'avg'"):
        mpiar.KVStore(op="max")
    with pytest.raises(TypeError):
        kv.set_optimizer("sgd")
    with pytest.raises(mpiar.InvalidArgError):
        kv.set_optimizer(mpiar.SGD(-1.0))
    with pytest.raises(mpiar.UnknownAlgorithmError):
        mpiar.KVStore(algorithm="nope")
    kv.init("i", np.zeros(2, np.int32))
    with pytest.raises(mpiar.BadDtypeOpError):
        kv.pushpull("i", np.zeros(2, np.int32))  # the store averages; ints cannot be averaged


@need_two
def test_one_worker_fails(kv, rank):
    """A worker whose own arguments are wrong raises its error; the others fail the store's
    agreement naming it, instead of waiting."""
    kv.init("f", np.zeros(4, np.float32))
    bad = np.zeros(4, np.float64) if rank == 1 else np.zeros(4, np.float32)
    if rank == 1:
        with pytest.raises(TypeError, match="dtype float64"):
            kv.pushpull("f", bad)
        with pytest.raises(TypeError):
            kv.init(None, np.zeros(1))
        with pytest.raises(TypeError):
            kv.broadcast("f", [0.0])
        with pytest.raises(TypeError):
            kv.save(None)
        with pytest.raises(TypeError):
            mpiar.KVStore(op=3)
    else:
        with pytest.raises(mpiar.MismatchError, match="worker 1"):
            kv.pushpull("f", bad)
        with pytest.raises(mpiar.MismatchError, match="worker 1"):
            kv.init("x", np.zeros(1))
        with pytest.raises(mpiar.MismatchError, match="worker 1"):
            kv.broadcast("f", np.zeros(4, np.float32))
        with pytest.raises(mpiar.Error, match="worker 1"):
            kv.save("never-written.ckpt")
        with pytest.raises(mpiar.MismatchError, match="worker 1"):
            mpiar.KVStore()
    x = np.ones(4, np.float32)
    kv.pushpull("f", x)
    np.testing.assert_array_equal(x, np.ones(4))


def test_unverified_store(rank, size):
    with mpiar.KVStore(op="sum", verify=False) as kv:
        kv.init("u", np.zeros(3))
        x = np.full(3, 1.0)
        kv.pushpull("u", x)
        np.testing.assert_array_equal(x, np.full(3, float(size)))


def test_subcommunicator(comm, rank, size):
    sub = comm.Split(rank % 2, rank)
    try:
        with mpiar.KVStore(sub, op="sum") as kv:
            assert kv.num_workers == sub.Get_size()
            kv.init(0, np.zeros(1, np.int64))
            x = np.array([rank], np.int64)
            kv.pushpull(0, x)
            assert x[0] == sum(r for r in range(size) if r % 2 == rank % 2)
    finally:
        sub.Free()


# ---- asynchronous pushpull ------------------------------------------------------------------

def test_async_equals_blocking_bit_for_bit(rank, size):
    """pushpull_async of many tensors (fused into several buffers, one larger than the
    threshold going alone, priorities reordering them) gives the bits of per-key pushpull."""
    rng = np.random.default_rng(100 + rank)
    shapes = [(5,), (3, 4), (1000,), (2, 2, 2), (0,), (70000,), (3000,), (1,)]
    names = [f"a{i}" for i in range(len(shapes))]
    vals = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    with mpiar.KVStore(fusion_bytes=16 << 10) as kv:
        kv.init(names, [np.zeros(s, np.float32) for s in shapes])
        expect = [v.copy() for v in vals]
        for name, e in zip(names, expect):
            kv.pushpull(name, e)
        got = [v.copy() for v in vals]
        reqs = [kv.pushpull_async(name, g, priority=(i * 7) % 5)
                for i, (name, g) in enumerate(zip(names, got))]
        assert all(isinstance(r, mpiar.Request) and not r.done for r in reqs)
        # Completion in another order than the start order; the first wait on a queued request
        # starts the queue (the same point on every worker).
        for r in reversed(reqs):
            r.wait()
        for e, g in zip(expect, got):
            assert g.tobytes() == e.tobytes()
        # A list of keys: one request per key, out= leaves the inputs alone, priorities per key.
        outs = [np.empty(s, np.float32) for s in shapes]
        reqs = kv.pushpull_async(names, vals, out=outs, priority=list(range(len(names))))
        assert isinstance(reqs, list) and len(reqs) == len(names)
        results = mpiar.waitall(reqs)
        assert all(res is o for res, o in zip(results, outs))
        for e, o in zip(expect, outs):
            assert o.tobytes() == e.tobytes()


def test_async_wait_all_and_test(kv, rank, size):
    kv.init(["p", "q"], [np.zeros(6), np.zeros(2)])
    p = np.full(6, float(rank))
    q = np.full(2, 2.0 * rank)
    rp = kv.pushpull_async("p", p, priority=-1)
    rq = kv.pushpull_async("q", q, priority=5)
    assert rp.wait() is p  # starts the queue (both tensors) and waits for p
    while not rq.test():
        pass
    np.testing.assert_allclose(p, np.full(6, (size - 1) / 2))
    np.testing.assert_allclose(q, np.full(2, size - 1.0))
    reqs = [kv.pushpull_async("p", np.full(6, 1.0)) for _ in range(3)]
    kv.wait_all()  # starts and finishes everything; the requests are then done
    assert all(r.done for r in reqs)
    assert all((r.wait() == 1.0).all() for r in reqs)
    kv.wait_all()  # nothing left: returns at once
    # A value dropped by the caller stays alive in its request.
    v = np.full(6, rank + 1.0)
    alive = weakref.ref(v)
    r = kv.pushpull_async("p", v)
    del v
    assert alive() is not None
    np.testing.assert_allclose(r.wait(), np.full(6, (size + 1) / 2))
    # Closing the store finishes its requests.
    r = kv.pushpull_async("q", np.ones(2))
    kv.close()
    assert r.done and (r.wait() == 1.0).all()


def test_async_errors(kv, rank, size):
    kv.init("f", np.zeros(4, np.float32))
    with pytest.raises(mpiar.KeyUnknownError):
        kv.pushpull_async("nope", np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="has dtype float64"):
        kv.pushpull_async("f", np.zeros(4))
    with pytest.raises(ValueError, match="priority is a list of 1 for 2 keys"):
        kv.pushpull_async(["f", "f"], [np.zeros(4, np.float32)] * 2, priority=[1])
    with pytest.raises(TypeError):
        kv.pushpull_async("f", np.zeros(4, np.float32), priority="high")
    # None of those queued anything: the store goes on.
    x = np.ones(4, np.float32)
    kv.pushpull_async("f", x).wait()
    np.testing.assert_array_equal(x, np.ones(4))
    if size > 1:
        # The priorities are part of the store's agreement at the start: a worker that passes
        # another one makes the start fail on every worker.
        r = kv.pushpull_async("f", np.ones(4, np.float32), priority=rank)
        with pytest.raises(mpiar.MismatchError):
            r.wait()
        kv.pushpull("f", x)
    # A request dropped while queued is completed (its first wait starts the queue).
    y = np.full(4, rank + 1.0, np.float32)
    with pytest.warns(ResourceWarning):
        kv.pushpull_async("f", y)
    np.testing.assert_allclose(y, np.full(4, (size + 1) / 2))


def test_update_equals_step(kv, rank, size):
    """step() is pushpull (average) then update(): async pushpull + update gives the same bits."""
    w0 = np.linspace(-1, 1, 9).astype(np.float32)
    kv.init(["s", "u"], [w0.copy(), w0.copy()])
    kv.set_optimizer(mpiar.SGD(0.1, momentum=0.9, weight_decay=0.01))
    rng = np.random.default_rng(rank)
    for _ in range(3):
        g = rng.standard_normal(9).astype(np.float32)
        g2 = g.copy()
        kv.step("s", g)
        kv.pushpull_async("u", g2).wait()
        kv.update("u", g2)
    assert kv.value("s").tobytes() == kv.value("u").tobytes()
    with pytest.raises(TypeError, match="dtype"):
        kv.update("u", np.zeros(9))
    kv.set_optimizer(None)
    with pytest.raises(mpiar.UnsupportedError):
        kv.update("u", np.zeros(9, np.float32))
