"""Reduce-scatter and allgather: mpiar.reduce_scatter_block / allgather, their nonblocking and
persistent forms, every algorithm by name, out given or made, and argument errors."""

import numpy as np
import pytest

import mpiar

RS_ALGS = [None, "ring", "recursive_halving", "direct", "repro_direct"]
AG_ALGS = [None, "ring", "recursive_doubling", "bruck", "direct"]


def tri(size):
    return size * (size + 1) // 2


@pytest.mark.parametrize("algorithm", RS_ALGS)
def test_reduce_scatter_block(rank, size, algorithm):
    x = np.arange(3 * size, dtype=np.float64) + rank
    y = mpiar.reduce_scatter_block(x, algorithm=algorithm)
    assert y.shape == (3,) and y.dtype == np.float64
    want = (np.arange(3 * size, dtype=np.float64) * size + size * (size - 1) / 2)[3 * rank:3 * rank + 3]
    np.testing.assert_array_equal(y, want)
    out = np.empty(3, dtype=np.float64)
    assert mpiar.reduce_scatter_block(x, op="max", out=out, algorithm=algorithm) is out
    np.testing.assert_array_equal(out, np.arange(3 * rank, 3 * rank + 3) + size - 1)


@pytest.mark.parametrize("algorithm", AG_ALGS)
def test_allgather(rank, size, algorithm):
    x = np.full((2, 2), rank + 1, dtype=np.int32)
    y = mpiar.allgather(x, algorithm=algorithm)
    assert y.shape == (4 * size,) and y.dtype == np.int32
    np.testing.assert_array_equal(y, np.repeat(np.arange(1, size + 1, dtype=np.int32), 4))
    out = np.zeros((size, 4), dtype=np.int32)
    assert mpiar.allgather(x, out=out, algorithm=algorithm) is out
    np.testing.assert_array_equal(out[:, 0], np.arange(1, size + 1))


def test_nonblocking_and_persistent(rank, size):
    x = np.full(2 * size, rank + 1, dtype=np.int64)
    req = mpiar.ireduce_scatter_block(x)
    np.testing.assert_array_equal(req.wait(), np.full(2, tri(size)))
    g = mpiar.iallgather(np.array([rank], dtype=np.float32)).wait()
    np.testing.assert_array_equal(g, np.arange(size, dtype=np.float32))
    out = np.empty(2, dtype=np.int64)
    p = mpiar.reduce_scatter_block_init(x, out=out)
    for k in range(3):
        x[:] = rank + k
        p.start()
        p.wait()
        np.testing.assert_array_equal(out, np.full(2, tri(size) - size + k * size))
    p.free()
    src = np.array([rank, -rank], dtype=np.int32)
    gout = np.empty(2 * size, dtype=np.int32)
    q = mpiar.allgather_init(src, out=gout)
    q.start()
    q.wait()
    np.testing.assert_array_equal(gout[::2], np.arange(size))
    q.free()


def test_errors(rank, size):
    if size > 1:
        with pytest.raises(ValueError):
            mpiar.reduce_scatter_block(np.zeros(size + 1))
    with pytest.raises(ValueError):
        mpiar.allgather(np.zeros(3), out=np.zeros(3 * size + 1))
    with pytest.raises(TypeError):
        mpiar.allgather(np.zeros(3), out=np.zeros(3 * size, dtype=np.float32))
    with pytest.raises(mpiar.Error):
        mpiar.reduce_scatter_block(np.zeros(size), algorithm="bruck")
