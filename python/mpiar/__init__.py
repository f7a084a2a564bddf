"""mpiar: MPI allreduce built by hand from point-to-point messages, for Python.

Communicators are mpi4py's (``MPI.COMM_WORLD`` by default, any intracommunicator); importing
mpiar imports ``mpi4py.MPI``, which initialises MPI. Arrays are NumPy arrays, CPU
``torch.Tensor`` objects, or anything with the buffer protocol or ``__array_interface__``;
contiguous data is never copied.

- ``allreduce(x, op="sum", out=None, comm=None, algorithm=None, segment_bytes=None,
  timeout_ms=None, check=True)``: the reduction of x over all ranks; a new array like x when
  ``out`` is None, x itself when ``out is x``.
- ``bcast(x, root=0, comm=None, ...)``: root's x into x on every rank.
- ``iallreduce(...)``, ``ibcast(...)``: the same, started in the background; they return a
  ``Request`` (``wait()``, ``test()``, ``done``, ``free()``, a context manager) that keeps every
  array it uses alive until the operation completes. ``allreduce_init(...)``, ``bcast_init(...)``:
  persistent requests, run again and again with ``start()``. ``waitall``, ``waitany``,
  ``testany`` on lists of requests. A request dropped while active is completed (waited for),
  since the operation is collective.
- ``reduce_scatter_block(x, op="sum", out=None, comm=None, ...)``: rank r's block r of the
  reduction of x (p equal blocks), a new one-dimensional array unless ``out`` is given;
  ``allgather(x, out=None, comm=None, ...)``: every rank's x in rank order (p x.size elements).
  Nonblocking (``ireduce_scatter_block``, ``iallgather``) and persistent (``..._init``) forms too.
- ``select(nbytes, nranks)``: the algorithm and segment size ``"auto"`` picks.
- ``KVStore``: the allreduce key-value store (init, pushpull, pushpull_async, wait_all,
  broadcast, step, update, save/load).
- ``mpiar.torch``: broadcast_parameters, broadcast_optimizer_state, DistributedOptimizer.
- ``alloc(shape, dtype="float32", comm=None, like="numpy")``: a NumPy array (or, with
  ``like="torch"``, a CPU tensor) on node-shared memory (``mpiar_alloc``): an allreduce on such
  arrays, on every rank, runs zero-copy when the ranks share one node (a blocking one across
  nodes of equal size: zero-copy inside each node). Collective. The memory is
  freed collectively too: once the array and every view of it are gone on every rank, at the
  next ``alloc``, ``free`` or ``collect()`` on that communicator (the garbage collector never
  frees it by itself, since the ranks collect at different moments); or at once by ``free(x)``,
  after which x and its views must not be used (as a pointer after ``free()`` in C).

Errors raise ``mpiar.Error`` subclasses, one per C error code (``mpiar.TimeoutError``,
``mpiar.MismatchError``, ...), with the library's detail in ``.detail``. With ``check=True`` (the
default) every collective call first checks, with one small allreduce, that all ranks pass
matching arguments; a rank whose arguments are wrong raises its own exception and the others a
``MismatchError`` naming it, instead of hanging.
"""

import weakref as _weakref

from mpi4py import MPI as _MPI  # noqa: F401  (MPI is initialised by mpi4py, before the extension)

from . import _mpiar
from ._mpiar import (Error, KVStore, Request, algorithms, allgather, allgather_init, allreduce,
                     allreduce_init, bcast, bcast_init, build_info, iallgather, iallreduce,
                     ibcast, ireduce_scatter_block, kernel_level, reduce_scatter_block,
                     reduce_scatter_block_init, select, testany, waitall, waitany)

__version__ = _mpiar.__version__

#: Exception class of each C error code, e.g. ``errors[-11] is mpiar.TimeoutError``.
errors = {cls.code: cls for cls in _mpiar._error_classes}
globals().update({cls.__name__: cls for cls in _mpiar._error_classes})


class SGD:
    """The optimizer ``KVStore.step()`` applies: SGD with momentum and weight decay.

    For each element, with g the gradient averaged over the workers::

        g' = g + weight_decay * w
        momentum == 0:  w = w - learning_rate * g'
        momentum != 0:  m = momentum * m - learning_rate * g';  w = w + m
    """

    __slots__ = ("learning_rate", "momentum", "weight_decay")

    def __init__(self, learning_rate, momentum=0.0, weight_decay=0.0):
        self.learning_rate = float(learning_rate)
        self.momentum = float(momentum)
        self.weight_decay = float(weight_decay)

    def __repr__(self):
        return (f"mpiar.SGD(learning_rate={self.learning_rate}, momentum={self.momentum}, "
                f"weight_decay={self.weight_decay})")



# ---- node-shared arrays ---------------------------------------------------------------------
#
# Freeing is collective (mpiar_free waits for every rank of the node), and the garbage collector
# drops an array at a different moment on each rank, so a drop only marks the allocation. The
# allocations of a communicator are numbered alike on every rank (alloc is collective), and at
# each collective point (alloc, free, collect) the ranks reduce a bitmap of the ones they have
# dropped with a bitwise AND: those dropped everywhere are freed, in number order, on every rank.


class _Allocations:
    """The node-shared allocations this process made on one communicator."""

    __slots__ = ("comm", "next", "floor", "live", "dropped")

    def __init__(self, comm):
        self.comm = comm
        self.next = 0           # the number of the next allocation (alike on every rank)
        self.floor = 0          # every allocation below it is freed (alike on every rank)
        self.live = {}          # number -> (address, nbytes)
        self.dropped = set()    # numbers this rank no longer uses

    def find(self, address):
        for number, (start, nbytes) in self.live.items():
            if start <= address < start + max(nbytes, 1):
                return number
        return None


_allocations = {}


def _allocations_of(comm):
    comm = _MPI.COMM_WORLD if comm is None else comm
    if not isinstance(comm, _MPI.Intracomm):
        raise TypeError(f"comm must be an mpi4py intracommunicator, not {type(comm).__name__}")
    key = _MPI._handleof(comm)
    state = _allocations.get(key)
    if state is None:
        state = _allocations[key] = _Allocations(comm)
    return state


def _dropped(key, number):
    state = _allocations.get(key) if _allocations is not None else None
    if state is not None and number in state.live:
        state.dropped.add(number)


def _collect(state):
    """Free what every rank has dropped (collective over state.comm). Returns the count."""
    import numpy as np
    n = state.next - state.floor
    if n <= 0:
        return 0
    bits = np.zeros(n, dtype=np.uint8)
    for number in list(state.dropped):
        bits[number - state.floor] = 1
    allreduce(bits, op="band", out=bits, comm=state.comm)
    freed = 0
    for i in np.flatnonzero(bits).tolist():
        number = state.floor + i
        address, _ = state.live.pop(number)
        state.dropped.discard(number)
        _mpiar._shm_release(address)
        freed += 1
    while state.floor < state.next and state.floor not in state.live:
        state.floor += 1
    return freed


def _layout(shape, dtype, like):
    """(shape tuple, element size, dtype) of an allocation; raises on bad arguments."""
    if like not in ("numpy", "torch"):
        raise ValueError(f"alloc: like must be 'numpy' or 'torch', not {like!r}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise ValueError(f"alloc: the shape must be non-negative integers, not {shape!r}")
    if like == "torch":
        import torch
        dt = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        if not isinstance(dt, torch.dtype):
            raise TypeError(f"alloc: {dtype!r} is not a torch dtype")
        return shape, torch.empty((), dtype=dt).element_size(), dt
    import numpy as np
    dt = np.dtype(dtype)
    return shape, dt.itemsize, dt


def alloc(shape, dtype="float32", comm=None, like="numpy"):
    """An array of ``shape`` and ``dtype`` on node-shared memory (collective over ``comm``).

    Returns a C-contiguous NumPy array, or a CPU ``torch.Tensor`` with ``like="torch"`` (then
    ``dtype`` may be a torch dtype, bfloat16 included). Its contents are undefined, as with
    ``numpy.empty``. An allreduce (``allreduce``, ``iallreduce``) on ``comm`` whose buffers are
    such arrays on every rank, with every rank on one node, runs zero-copy (docs/shm.md; a
    blocking ``allreduce`` across nodes of equal size runs zero-copy inside each node). Views,
    ``torch.from_numpy`` and ``Tensor.numpy()`` share the memory. See ``free`` for its lifetime.
    A bad argument on one rank raises there and makes the call fail on every rank.
    """
    return _alloc(_allocations_of(comm), shape, dtype, like)


def _alloc(state, shape, dtype, like):
    try:
        shape, itemsize, dt = _layout(shape, dtype, like)
        count = 1
        for d in shape:
            count *= d
        nbytes = count * itemsize
        error = None
    except (TypeError, ValueError, AttributeError) as e:
        nbytes, error = -1, e      # -1 is refused by mpiar_alloc on every rank
    _collect(state)
    try:
        buf = _mpiar._shm_alloc(nbytes, state.comm)   # fails on every rank when any rank failed
    except (Error, ValueError):
        if error is not None:
            raise error from None
        raise
    number = state.next
    state.next += 1
    state.live[number] = (buf.address, nbytes)
    _weakref.finalize(buf, _dropped, _MPI._handleof(state.comm), number).atexit = False
    import numpy as np
    raw = np.frombuffer(buf, dtype=np.uint8)
    if like == "torch":
        import torch
        return torch.from_numpy(raw).view(dt).view(shape)
    return raw.view(dt).reshape(shape)


def _address_of(x):
    if hasattr(x, "data_ptr") and hasattr(x, "is_cuda"):
        return x.data_ptr()
    interface = getattr(x, "__array_interface__", None)
    if interface is None:
        raise TypeError(f"free: {type(x).__name__} is not an array from mpiar.alloc")
    return interface["data"][0]


def free(x, comm=None):
    """Free the node-shared memory of ``x`` (an array or tensor from ``alloc``, or a view into it)
    now, on every rank of ``comm`` (collective; every rank must free the same allocation).

    Afterwards ``x`` and every array, view or tensor over that memory must not be used: the
    memory is gone, as a pointer after ``free()`` in C (what MPI does with the pages decides
    whether a use faults or silently reads and writes memory that is no longer this array's).
    Without ``free``, the memory of an array that is gone (with every view of it) on every rank
    is freed at the next ``alloc``, ``free`` or ``collect()`` on the communicator, which is always
    safe, and what is left at ``MPI_Finalize`` is freed there. Raises ``ValueError`` on a rank
    where ``x`` is not live memory of ``alloc`` on ``comm`` (``TypeError`` when it is not an array),
    and ``mpiar.MismatchError`` on the others, or on every rank when the ranks name different
    allocations; nothing is freed then.
    """
    import numpy as np
    state = _allocations_of(comm)
    number, error = None, None
    try:
        number = state.find(_address_of(x))
        if number is None:
            error = ValueError("free: the array is not live memory of mpiar.alloc on this "
                               "communicator")
    except TypeError as e:
        error = e
    mine = -1 if number is None else number
    words = np.array([mine, -mine], dtype=np.int64)
    allreduce(words, op="max", out=words, comm=state.comm)
    if error is not None:
        raise error
    if words[1] > 0 or -words[1] != words[0]:
        why = ("another rank could not free its array" if words[1] > 0
               else "the ranks free different allocations")
        raise MismatchError("free: " + why)  # noqa: F821 (a class of the C error list, above)
    state.dropped.add(number)
    _collect(state)


def collect(comm=None):
    """Free the node-shared memory that every rank of ``comm`` has dropped (collective).
    Returns how many allocations were freed."""
    return _collect(_allocations_of(comm))


__all__ = ["Error", "KVStore", "Request", "SGD", "algorithms", "allgather", "allgather_init",
           "allreduce", "allreduce_init", "bcast", "bcast_init", "build_info", "errors",
           "iallgather", "iallreduce", "ibcast", "ireduce_scatter_block", "kernel_level",
           "reduce_scatter_block", "reduce_scatter_block_init", "select", "testany", "waitall",
           "waitany", "alloc", "free", "collect"] + [cls.__name__ for cls in _mpiar._error_classes]
