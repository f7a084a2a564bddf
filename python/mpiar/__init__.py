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

Errors raise ``mpiar.Error`` subclasses, one per C error code (``mpiar.TimeoutError``,
``mpiar.MismatchError``, ...), with the library's detail in ``.detail``. With ``check=True`` (the
default) every collective call first checks, with one small allreduce, that all ranks pass
matching arguments; a rank whose arguments are wrong raises its own exception and the others a
``MismatchError`` naming it, instead of hanging.
"""

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


__all__ = ["Error", "KVStore", "Request", "SGD", "algorithms", "allgather", "allgather_init",
           "allreduce", "allreduce_init", "bcast", "bcast_init", "build_info", "errors",
           "iallgather", "iallreduce", "ibcast", "ireduce_scatter_block", "kernel_level",
           "reduce_scatter_block", "reduce_scatter_block_init", "select", "testany", "waitall",
           "waitany"] + [cls.__name__ for cls in _mpiar._error_classes]
