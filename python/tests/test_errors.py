"""Bad input gives a clear Python exception on every rank, never a crash or a hang: wrong types,
unsupported dtypes, non-contiguous or read-only outputs, and arguments that differ between
ranks (found by the cross-rank check before any data moves)."""

import time

import numpy as np
import pytest
from mpi4py import MPI

import mpiar


def test_error_classes():
    assert issubclass(mpiar.TimeoutError, mpiar.Error)
    assert issubclass(mpiar.TimeoutError, TimeoutError)
    assert issubclass(mpiar.UnsupportedError, NotImplementedError)
    assert issubclass(mpiar.MismatchError, ValueError)
    assert issubclass(mpiar.BadDtypeOpError, TypeError)
    assert issubclass(mpiar.IoError, OSError)
    assert issubclass(mpiar.KeyUnknownError, LookupError)
    assert mpiar.TimeoutError.code == -11 and mpiar.TimeoutError.name == "MPIAR_ERR_TIMEOUT"
    assert mpiar.errors[-11] is mpiar.TimeoutError
    assert all(cls.code < 0 and issubclass(cls, mpiar.Error) for cls in mpiar.errors.values())


@pytest.mark.parametrize("bad", [[1.0, 2.0], 3, "abc", None, object()])
def test_not_an_array(bad):
    with pytest.raises(TypeError, match="must be a NumPy array"):
        mpiar.allreduce(bad)


class _RaisesInInterface:
    """An array-like whose __array_interface__ fails with the program's own exception."""

    def __init__(self, exc):
        self.exc = exc

    @property
    def __array_interface__(self):
        raise self.exc


def test_exception_of_array_interface_is_kept():
    # The program's exception comes through as it was raised, not as "not an array".
    with pytest.raises(RuntimeError, match="the interface broke") as info:
        mpiar.allreduce(_RaisesInInterface(RuntimeError("the interface broke")))
    assert "must be a NumPy array" not in str(info.value)
    with pytest.raises(ZeroDivisionError):
        mpiar.bcast(_RaisesInInterface(ZeroDivisionError("no")))
    out = np.zeros(3)
    with pytest.raises(KeyError, match="shape"):
        mpiar.allreduce(np.ones(3), out=_RaisesInInterface(KeyError("shape")))
    # An AttributeError raised inside the property reads as "no interface": the TypeError then
    # names its cause instead of hiding it.
    with pytest.raises(TypeError, match="must be a NumPy array") as info:
        mpiar.allreduce(_RaisesInInterface(AttributeError("a typo inside the property")))
    assert isinstance(info.value.__cause__, AttributeError)
    assert "a typo inside the property" in str(info.value.__cause__)
    # A plain object without the attribute has no cause to show.
    with pytest.raises(TypeError, match="must be a NumPy array") as info:
        mpiar.allreduce(object())
    assert info.value.__cause__ is None
    assert out.tolist() == [0.0] * 3


@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.complex64, np.longdouble, object,
                                   ">f4", "S3", [("a", "i4"), ("b", "f4")]])
def test_unsupported_dtypes(dtype):
    x = np.zeros(4, dtype=dtype)
    with pytest.raises(TypeError, match="does not reduce"):
        mpiar.allreduce(x)


def test_bad_outputs():
    x = np.ones(6, dtype=np.float32)
    ro = np.zeros(6, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        mpiar.allreduce(x, out=ro)
    with pytest.raises(ValueError, match="not contiguous"):
        mpiar.allreduce(x[:3], out=np.zeros(6, np.float32)[::2])
    with pytest.raises(TypeError, match="dtype"):
        mpiar.allreduce(x, out=np.zeros(6, np.float64))
    with pytest.raises(ValueError, match="shape"):
        mpiar.allreduce(x, out=np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="shape"):
        mpiar.allreduce(x, out=np.zeros(5, np.float32))
    with pytest.raises(TypeError):
        mpiar.allreduce(x, out=[0.0] * 6)
    with pytest.raises(ValueError, match="read-only"):
        mpiar.allreduce(bytes(4), out=bytes(4))
    buf = np.zeros(8, np.float32)
    with pytest.raises(mpiar.OverlapError):
        mpiar.allreduce(buf[:6], out=buf[2:])


def test_bad_in_place():
    x = np.ones(6)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        mpiar.allreduce(x, out=x)
    y = np.ones(12)[::2]
    with pytest.raises(ValueError, match="not contiguous"):
        mpiar.allreduce(y, out=y)


def test_bad_ops_and_options():
    x = np.ones(3, np.int32)
    with pytest.raises(ValueError, match="unknown op"):
        mpiar.allreduce(x, op="mean")
    with pytest.raises(TypeError, match="op must be a string"):
        mpiar.allreduce(x, op=MPI.SUM)
    with pytest.raises(mpiar.BadDtypeOpError, match="avg"):
        mpiar.allreduce(x, op="avg")
    with pytest.raises(mpiar.BadDtypeOpError, match="bool only"):
        mpiar.allreduce(x, op="land")
    with pytest.raises(mpiar.BadDtypeOpError, match="not defined on bool"):
        mpiar.allreduce(np.ones(3, bool), op="sum")
    with pytest.raises(mpiar.UnknownAlgorithmError):
        mpiar.allreduce(x, algorithm="fastest")
    # Parameterised names: a k outside the entry's range is refused naming the range.
    with pytest.raises(mpiar.UnknownAlgorithmError, match="2..8"):
        mpiar.allreduce(x, algorithm="recursive_multiplying/k=9")
    with pytest.raises(TypeError):
        mpiar.allreduce(x, algorithm=3)
    with pytest.raises(ValueError, match="negative"):
        mpiar.allreduce(x, segment_bytes=-1)
    with pytest.raises(TypeError):
        mpiar.allreduce(x, timeout_ms="1s")
    with pytest.raises(TypeError, match="unexpected keyword"):
        mpiar.allreduce(x, opp="sum")
    with pytest.raises(TypeError, match="missing required"):
        mpiar.allreduce(op="sum")
    with pytest.raises(TypeError, match="multiple values"):
        mpiar.allreduce(x, "sum", op="sum")


def test_bad_communicators(comm, size):
    x = np.ones(2)
    with pytest.raises(TypeError, match="mpi4py communicator"):
        mpiar.allreduce(x, comm="world")
    with pytest.raises(mpiar.CommError, match="COMM_NULL"):
        mpiar.allreduce(x, comm=MPI.COMM_NULL)
    if size < 2:
        return
    # Even and odd ranks form two groups; each group's leader is its lowest rank in comm.
    local = comm.Split(comm.Get_rank() % 2, comm.Get_rank())
    inter = local.Create_intercomm(0, comm, 1 - comm.Get_rank() % 2, tag=7)
    try:
        with pytest.raises(mpiar.CommError, match="intercommunicator"):
            mpiar.allreduce(x, comm=inter)
    finally:
        inter.Free()
        local.Free()


def test_bad_bcast(size, rank):
    with pytest.raises(ValueError, match="root"):
        mpiar.bcast(np.ones(2), root=size)
    with pytest.raises(ValueError, match="root"):
        mpiar.bcast(np.ones(2), root=-1)
    ro = np.ones(2)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        mpiar.bcast(ro)
    with pytest.raises(ValueError, match="not contiguous"):
        mpiar.bcast(np.ones(8)[::2])


# ---- arguments that differ between ranks ---------------------------------------------------

need_two = pytest.mark.skipif(MPI.COMM_WORLD.Get_size() < 2, reason="needs 2 ranks")


@need_two
def test_count_differs(rank):
    with pytest.raises(mpiar.MismatchError, match="element count differs"):
        mpiar.allreduce(np.ones(4 + (rank == 1), np.float32))


@need_two
def test_dtype_differs(rank):
    x = np.ones(4, np.float32 if rank else np.int32)
    with pytest.raises(mpiar.MismatchError, match="dtype differs.*(float32|int32)"):
        mpiar.allreduce(x)


@need_two
def test_op_differs(rank):
    with pytest.raises(mpiar.MismatchError, match="op differs"):
        mpiar.allreduce(np.ones(4), op="max" if rank == 1 else "min")


@need_two
def test_shape_differs(rank):
    x = np.ones((2, 3) if rank == 1 else (3, 2))
    with pytest.raises(mpiar.MismatchError, match="shape"):
        mpiar.allreduce(x)


@need_two
def test_algorithm_differs(rank):
    with pytest.raises(mpiar.MismatchError, match="algorithm"):
        mpiar.allreduce(np.ones(4), algorithm="ring" if rank == 1 else "rabenseifner")


@need_two
def test_root_differs(rank):
    with pytest.raises(mpiar.MismatchError, match="root differs"):
        mpiar.bcast(np.ones(4), root=1 if rank == 1 else 0)


@need_two
def test_one_rank_fails_its_own_checks(rank):
    """The failing rank raises its own error; the others learn which rank failed."""
    if rank == 1:
        with pytest.raises(TypeError, match="must be a NumPy array"):
            mpiar.allreduce([1, 2, 3])
        out = np.zeros(3)
        out.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            mpiar.allreduce(np.ones(3), out=out)
        with pytest.raises(mpiar.UnknownAlgorithmError):
            mpiar.allreduce(np.ones(3), algorithm="nope")
    else:
        for _ in range(3):
            with pytest.raises(mpiar.MismatchError, match="rank 1 failed its argument checks"):
                mpiar.allreduce(np.ones(3))


@need_two
def test_timeout_then_broken(comm, rank):
    """Rank 0 waits for ranks that come too late: the deadline turns the wait into TimeoutError
    with the library's detail, and that rank's context on the communicator is broken from then
    on. The late ranks learn of the failure (CommBrokenError naming rank 0), time out
    themselves, or complete from messages rank 0 sent before it gave up."""
    dup = comm.Dup()
    x = np.ones(4)
    mpiar.allreduce(x, comm=dup)  # creates mpiar's context on dup (a collective of its own)
    try:
        if rank == 0:
            with pytest.raises(mpiar.TimeoutError) as info:
                mpiar.allreduce(x, comm=dup, timeout_ms=200, check=False)
            assert info.value.code == -11
            assert info.value.detail and str(info.value).startswith("mpiar.allreduce")
            with pytest.raises(mpiar.CommBrokenError):
                mpiar.allreduce(x, comm=dup, check=False)
        else:
            time.sleep(0.6)
            try:
                mpiar.allreduce(x, comm=dup, timeout_ms=200, check=False)
            except mpiar.CommBrokenError as e:
                assert "rank 0" in e.detail
            except mpiar.TimeoutError:
                pass
    finally:
        comm.Barrier()
        dup.Free()
