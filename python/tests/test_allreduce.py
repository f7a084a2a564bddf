"""mpiar.allreduce, bcast and select on NumPy arrays and other buffers, against NumPy's own
reduction of every rank's data (each rank generates all ranks' inputs from fixed seeds)."""

import array

import numpy as np
import pytest
from mpi4py import MPI

import mpiar

DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32,
          np.float64, np.bool_]
OPS = ["sum", "prod", "min", "max", "band", "bor", "bxor", "avg", "land", "lor", "lxor"]
FLOATS = (np.float16, np.float32, np.float64)
COUNT = 37


def supported(dtype, op):
    if dtype is np.bool_:
        return op in ("land", "lor", "lxor", "band", "bor", "bxor", "min", "max")
    if op in ("land", "lor", "lxor"):
        return False
    if dtype in FLOATS:
        return op not in ("band", "bor", "bxor")
    return op != "avg"


def data(dtype, op, r, n=COUNT):
    """Rank r's input. Floats are small integers (halves for sums), so every sum, product and
    average of up to 4 ranks is exact in every format; integers span their whole range, so sums
    and products wrap as in NumPy."""
    rng = np.random.default_rng([r, DTYPES.index(dtype), OPS.index(op)])
    if dtype is np.bool_:
        return rng.integers(0, 2, n).astype(np.bool_)
    if dtype in FLOATS:
        if op == "prod":
            v = rng.integers(-3, 4, n).astype(np.float64)
            v[v == 0] = 1
        else:
            v = rng.integers(-16, 17, n) / 2.0
            v[v == 0] = 0.5
        return v.astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


def reference(dtype, op, size, n=COUNT):
    xs = np.stack([data(dtype, op, r, n) for r in range(size)])
    if op == "avg":
        return (xs.astype(np.float64).sum(axis=0) / size).astype(dtype)
    ufunc = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
             "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor,
             "land": np.logical_and, "lor": np.logical_or, "lxor": np.logical_xor}[op]
    with np.errstate(over="ignore"):
        return ufunc.reduce(xs, axis=0, dtype=dtype).astype(dtype)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_and_op(dtype, op, rank, size):
    x = data(dtype, op, rank)
    if not supported(dtype, op):
        with pytest.raises(mpiar.BadDtypeOpError):
            mpiar.allreduce(x, op=op)
        return
    before = x.copy()
    y = mpiar.allreduce(x, op=op)
    assert isinstance(y, np.ndarray) and y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, reference(dtype, op, size))
    np.testing.assert_array_equal(x, before)  # the input is not touched


@pytest.mark.parametrize("algorithm", [None, "auto"] + list(mpiar.algorithms()) +
                         ["recursive_multiplying/k=3", "kary_tree/k=3"])
@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 1000, 100003])
def test_algorithms_and_counts(algorithm, n, rank, size):
    x = data(np.float32, "sum", rank, n)
    y = mpiar.allreduce(x, algorithm=algorithm, segment_bytes=4096 if n > 1000 else None)
    np.testing.assert_array_equal(y, reference(np.float32, "sum", size, n))
    z = data(np.int64, "bxor", rank, n)
    np.testing.assert_array_equal(mpiar.allreduce(z, op="bxor", algorithm=algorithm),
                                  reference(np.int64, "bxor", size, n))


def test_random_floats_within_rounding(rank, size):
    rng = np.random.default_rng(rank)
    x = rng.standard_normal(4099)
    xs = np.stack([np.random.default_rng(r).standard_normal(4099) for r in range(size)])
    np.testing.assert_allclose(mpiar.allreduce(x), xs.sum(axis=0), rtol=1e-12, atol=1e-12)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(mpiar.allreduce(x32, op="avg"), xs.astype(np.float32).mean(axis=0),
                               rtol=1e-5, atol=1e-5)


def test_results_bitwise_identical_on_every_rank(comm, rank):
    x = np.random.default_rng(rank).standard_normal(10007).astype(np.float32)
    y = mpiar.allreduce(x)
    bits = y.view(np.uint32)
    assert np.array_equal(mpiar.allreduce(bits, op="max"), bits)
    assert np.array_equal(mpiar.allreduce(bits, op="min"), bits)


def test_in_place_and_out(rank, size):
    ref = reference(np.int32, "sum", size)
    x = data(np.int32, "sum", rank)
    assert mpiar.allreduce(x, out=x) is x
    np.testing.assert_array_equal(x, ref)
    x = data(np.int32, "sum", rank)
    out = np.empty_like(x)
    assert mpiar.allreduce(x, out=out) is out
    np.testing.assert_array_equal(out, ref)
    # A second view of the same memory is in place too.
    x = data(np.int32, "sum", rank)
    v = x.view()
    assert mpiar.allreduce(x, out=v) is v
    np.testing.assert_array_equal(x, ref)


def test_zero_size_and_zero_dim(rank, size):
    e = np.empty(0, dtype=np.float64)
    assert mpiar.allreduce(e).shape == (0,)
    assert mpiar.allreduce(e, out=e) is e
    assert mpiar.allreduce(np.empty((3, 0), np.int8)).shape == (3, 0)
    s = np.array(rank + 1.0)
    r = mpiar.allreduce(s)
    assert r.shape == () and r == size * (size + 1) / 2
    assert mpiar.allreduce(np.float32(2.0)) == 2.0 * size


def test_non_contiguous_input(rank, size):
    base = np.stack([data(np.float64, "sum", rank, 16) for _ in range(6)]).reshape(6, 16)
    refbase = np.stack([np.stack([data(np.float64, "sum", r, 16) for _ in range(6)])
                        for r in range(size)]).sum(axis=0)
    for view, refview in [(base[:, ::2], refbase[:, ::2]), (base[::-1], refbase[::-1]),
                          (base.T, refbase.T), (base[1:5, 3:9].T, refbase[1:5, 3:9].T)]:
        y = mpiar.allreduce(view)
        assert y.shape == view.shape and y.flags.c_contiguous
        np.testing.assert_array_equal(y, refview)
        out = np.empty(view.shape, order="F")
        assert mpiar.allreduce(view, out=out) is out
        np.testing.assert_array_equal(out, refview)


def test_fortran_order_in_place(rank, size):
    x = np.asfortranarray(np.arange(12.0).reshape(3, 4) * (rank + 1))
    mpiar.allreduce(x, out=x)
    np.testing.assert_array_equal(x, np.arange(12.0).reshape(3, 4) * size * (size + 1) / 2)


def test_read_only_input(rank, size):
    x = np.full(5, rank, dtype=np.int64)
    x.flags.writeable = False
    np.testing.assert_array_equal(mpiar.allreduce(x), np.full(5, size * (size - 1) // 2))


def test_other_buffers(rank, size):
    total = size * (size - 1) // 2
    b = bytearray([rank, 1, 2])
    assert mpiar.allreduce(b, out=b) is b and list(b) == [total, size, 2 * size]
    a = array.array("d", [rank, 0.5])
    mpiar.allreduce(a, out=a)
    assert list(a) == [total, 0.5 * size]
    m = memoryview(bytearray(8)).cast("i")
    m[0], m[1] = rank, -rank
    assert mpiar.allreduce(m, op="max", out=m) is m and list(m) == [size - 1, 0]
    r = mpiar.allreduce(bytes([rank]))  # a read-only input gives a new NumPy array
    assert isinstance(r, np.ndarray) and r.dtype == np.uint8 and r[0] == total


class Interface:
    """An object exposing only __array_interface__."""

    def __init__(self, arr):
        self.arr = arr
        self.__array_interface__ = arr.__array_interface__


def test_array_interface_objects(rank, size):
    backing = np.full(4, rank, dtype=np.int32)
    obj = Interface(backing)
    assert mpiar.allreduce(obj, out=obj) is obj
    np.testing.assert_array_equal(backing, np.full(4, size * (size - 1) // 2))
    y = mpiar.allreduce(Interface(np.ones(3)))
    np.testing.assert_array_equal(y, np.full(3, float(size)))


def test_subcommunicators(comm, rank, size):
    sub = comm.Split(rank % 2, rank)
    try:
        members = [r for r in range(size) if r % 2 == rank % 2]
        y = mpiar.allreduce(np.array([rank], np.int64), comm=sub)
        assert y[0] == sum(members)
    finally:
        sub.Free()
    y = mpiar.allreduce(np.array([rank + 1.0]), comm=MPI.COMM_SELF)
    assert y[0] == rank + 1.0


def test_check_false(rank, size):
    x = data(np.float32, "max", rank)
    np.testing.assert_array_equal(mpiar.allreduce(x, op="max", check=False),
                                  reference(np.float32, "max", size))


def test_timeout_option(rank, size):
    x = np.full(3, 1.0)
    np.testing.assert_array_equal(mpiar.allreduce(x, timeout_ms=30000), np.full(3, float(size)))
    np.testing.assert_array_equal(mpiar.allreduce(x, timeout_ms=-1), np.full(3, float(size)))


def test_from_a_thread(rank, size):
    import threading
    result = {}

    def work():
        result["y"] = mpiar.allreduce(np.array([rank], np.int64))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert result["y"][0] == size * (size - 1) // 2


@pytest.mark.parametrize("root_from_end", [1, 0])
@pytest.mark.parametrize("n", [0, 1, 1000, 300001])
def test_bcast(rank, size, root_from_end, n):
    root = size - 1 if root_from_end else 0
    x = np.full(n, rank, dtype=np.float32)
    assert mpiar.bcast(x, root=root) is x
    np.testing.assert_array_equal(x, np.full(n, root, dtype=np.float32))
    b = np.zeros(n, dtype=np.bool_)
    if rank == root:
        b[::3] = True
    mpiar.bcast(b, root)
    np.testing.assert_array_equal(b, np.arange(n) % 3 == 0)


def test_select(size):
    alg, seg = mpiar.select(8, 2)
    assert alg in mpiar.algorithms() and seg == 0
    alg, seg = mpiar.select(1 << 30, 64)
    assert alg in mpiar.algorithms() and seg >= 0
    with pytest.raises(mpiar.Error):
        mpiar.select(8, 0)
    with pytest.raises(ValueError):
        mpiar.select(-1, 2)


def test_module_information():
    assert mpiar.__version__ == mpiar.build_info["mpiar_library"]
    assert mpiar.kernel_level() in ("reference", "avx2", "avx512")
    assert set(mpiar.algorithms()) >= {"ring", "rabenseifner", "recursive_doubling"}
