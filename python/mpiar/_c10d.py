"""The ``mpiar`` backend of ``torch.distributed`` (registered by ``import mpiar.torch``).

``ProcessGroupMpiar`` is a ``torch.distributed.ProcessGroup`` written in Python over an mpi4py
communicator: all_reduce, broadcast, reduce_scatter, _reduce_scatter_base, all_gather,
_all_gather_base, reduce, allreduce_coalesced and barrier run on mpiar; send/recv, gather,
scatter and all_to_all run on the same ranks through mpi4py.

Execution. Every collective of a group runs on the group's executor, in the order the program
calls them, which is the same on every rank. A call made while the executor is idle runs at once
in the calling thread and returns a completed work when it is on at most ``inline_bytes`` of data
or when torch.distributed's function called it with ``async_op=False`` (``_blocking_caller``);
any other call is queued for the group's worker thread, so that ``async_op=True`` (and DDP's
bucket allreduces) return at once and communicate while the caller computes. The worker waits
for a reduction by testing it and yielding the core between tests (``os.sched_yield``), so that
on a busy node it leaves the core to the caller's computation. ``Work.wait()`` on a call still
queued runs the queue up to it in the waiting thread instead of waking the worker. The C calls
release the GIL.

Checks. Before any data moves, every rank checks its arguments locally (device, layout,
contiguity, dtype, operation), and the ranks then agree that they all passed and called the same
collective with the same dtype, operation, root, element count and shapes. all_reduce, broadcast,
reduce, _allgather_base and _reduce_scatter_base leave the agreement to the data call itself
(mpiar's own, ``check=True`` of ``mpiar.allreduce`` and friends: one allreduce of 128 bytes in C
before the data moves); the other collectives agree on their fields (``_agree``), through the same
C agreement, before their data call. A rank whose arguments are wrong raises its own exception
naming the problem and sends none of its data, after joining the agreement as a rank that failed
(``_join_failed``); every other rank raises ``mpiar.MismatchError`` naming it, and so does every
rank when the calls differ between ranks. ``check=False`` on the group skips the agreement.

Staging. Each group keeps a buffer of node-shared memory (``_Pool``, ``mpiar.alloc``) on which
the C library's allreduce, allgather and reduce-scatter run zero-copy: all_reduce_coalesced and
the list forms of all_gather and reduce_scatter stage there instead of in tensors made per call,
and a mid-size all_reduce is copied there and back, at the sizes where that measured faster
(the group's ``pool_*`` options). The pool grows only on the executor after the ranks agreed on
the call, so that every rank grows it alike.

The two block collectives are one function each, ``allgather_into`` and ``reduce_scatter_into``
below (mpiar's allgather and reduce-scatter): every all_gather and reduce_scatter of the backend
goes through them.
"""

import collections
import datetime
import os
import socket
import sys
import threading

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

import mpiar

__all__ = ["ProcessGroupMpiar", "Work", "allgather_into", "reduce_scatter_into"]

#: Calls on at most this many bytes run in the calling thread when the executor is idle.
INLINE_BYTES = 64 * 1024
#: allreduce_coalesced and the list forms of all_gather and reduce_scatter whose staging takes at
#: least this many bytes stage in the group's pool of node-shared memory instead of a tensor made
#: per call (docs/python.md, "Staging on node-shared memory"); also the pool's smallest size.
POOL_BYTES = 1 << 20
#: all_reduce of at least POOL_ALLREDUCE_BYTES and at most POOL_ALLREDUCE_MAX_BYTES is copied into
#: the pool, reduced there and copied back: where the zero-copy reduction measured faster than
#: the two copies cost (docs/python.md; at 64 MiB it did not).
POOL_ALLREDUCE_BYTES = 1 << 20
POOL_ALLREDUCE_MAX_BYTES = 16 << 20
#: The list form of all_gather stages in the pool when each rank's input has at least this many
#: bytes (at 1 MiB its extra copy of the input cost more than the zero-copy allgather saved).
POOL_ALLGATHER_BYTES = 4 << 20
#: Works kept alive for C++ callers (which hold only the C++ half of a Python Work) until they are
#: waited for, their future is taken, or this many newer works exist.
_KEEP_WORKS = 1024

_RED_DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
               torch.bfloat16: "bfloat16", torch.int8: "int8", torch.uint8: "uint8",
               torch.int32: "int32", torch.int64: "int64", torch.bool: "bool"}
_DTYPE_CODE = {}
for _i, _d in enumerate([torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
                         torch.uint8, torch.int32, torch.int64, torch.bool, torch.int16,
                         torch.complex64, torch.complex128]):
    _DTYPE_CODE[_d] = _i + 1
_R = dist.ReduceOp
_OPS = {_R.SUM: "sum", _R.AVG: "avg", _R.PRODUCT: "prod", _R.MIN: "min", _R.MAX: "max",
        _R.BAND: "band", _R.BOR: "bor", _R.BXOR: "bxor"}
_BOOL_OPS = {"sum": "bor", "max": "max", "min": "min", "prod": "band", "band": "band",
             "bor": "bor", "bxor": "bxor"}
_OP_CODE = {name: i + 1 for i, name in enumerate(["sum", "avg", "prod", "min", "max", "band",
                                                   "bor", "bxor"])}

# Collective identifiers of the agreement.
(_ALLREDUCE, _BROADCAST, _ALLGATHER, _REDUCE_SCATTER, _BARRIER, _REDUCE, _GATHER, _SCATTER,
 _ALLTOALL, _COALESCED) = range(1, 11)
_KIND_NAME = {_ALLREDUCE: "allreduce", _BROADCAST: "broadcast", _ALLGATHER: "allgather",
              _REDUCE_SCATTER: "reduce_scatter", _BARRIER: "barrier", _REDUCE: "reduce",
              _GATHER: "gather", _SCATTER: "scatter", _ALLTOALL: "alltoall",
              _COALESCED: "allreduce_coalesced"}
_FIELDS = ("collective", "dtype", "op", "root", "element count", "shapes or split sizes")
_MASK = (1 << 64) - 1
_yield = getattr(os, "sched_yield", lambda: None)


def _fingerprint(values):
    h = 14695981039346656037
    for v in values:
        for byte in repr(v).encode():
            h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h >> 2


# ---- local checks ---------------------------------------------------------------------------

def _check_tensor(t, what, fname, reduce_dtype=False):
    """Raise the exception torch's own backends raise (naming the problem) for a tensor that the
    backend cannot use: not a tensor, on another device, not strided, not contiguous, or (for a
    reduction) of a dtype mpiar cannot reduce."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fname}: {what} is a {type(t).__name__}, not a torch.Tensor")
    if t.device.type != "cpu":
        raise ValueError(f"{fname}: {what} is a {t.device.type} tensor ({t.device}); the mpiar "
                         "backend reduces CPU tensors only")
    if t.layout != torch.strided:
        raise ValueError(f"{fname}: {what} has layout {t.layout}; the mpiar backend needs dense "
                         "(strided) tensors")
    if not t.is_contiguous():
        raise ValueError(f"{fname}: {what} is not contiguous (shape {tuple(t.shape)}, stride "
                         f"{tuple(t.stride())}); pass tensor.contiguous()")
    if reduce_dtype and t.dtype not in _RED_DTYPES:
        raise TypeError(f"{fname}: {what} has dtype {t.dtype}, which the mpiar backend cannot "
                        "reduce (float32, float64, float16, bfloat16, int8, uint8, int32, int64, "
                        "bool)")
    if t.dtype not in _DTYPE_CODE:
        raise TypeError(f"{fname}: {what} has dtype {t.dtype}, which the mpiar backend does not "
                        "support")


def _op_name(op, dtype, fname):
    name = _OPS.get(op)
    if name is None:
        raise ValueError(f"{fname}: the reduction {op} is not supported by the mpiar backend "
                         "(SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR)")
    if dtype == torch.bool:
        if name == "avg":
            raise TypeError(f"{fname}: ReduceOp.AVG needs a floating dtype, not torch.bool")
        return _BOOL_OPS[name]
    floating = dtype.is_floating_point
    if name in ("band", "bor", "bxor") and floating:
        raise TypeError(f"{fname}: ReduceOp.{name.upper()} needs an integer dtype, not {dtype}")
    if name == "avg" and not floating:
        raise TypeError(f"{fname}: ReduceOp.AVG needs a floating dtype, not {dtype}")
    return name


def _bytes(t):
    """A contiguous tensor's memory as a flat uint8 tensor (the same memory)."""
    flat = t.detach().reshape(-1)
    return flat.view(torch.uint8) if flat.dtype != torch.uint8 else flat


def _np_bytes(t):
    return _bytes(t).numpy()


def _writable(t):
    """The tensor mpiar writes into: t itself, or a view that autograd does not watch when t
    requires grad (torch's own backends write such tensors in place too)."""
    return t.detach() if t.requires_grad else t


# ---- the block collectives ------------------------------------------------------------------

def allgather_into(comm, out, inp, algorithm=None, check=False):
    """Every rank's ``inp`` (flat, contiguous) into ``out`` (size * inp.numel() elements of the
    same dtype), rank i's block at offset i * inp.numel(): mpiar's allgather of the bytes (so
    every dtype travels, bool and complex included), with mpiar's argument agreement if
    ``check``. ``algorithm`` names an allreduce (the group's option), not an allgather: the
    allgather chooses its own."""
    del algorithm
    mpiar.allgather(_bytes(inp), out=_bytes(_writable(out)), comm=comm, check=check)


def reduce_scatter_into(comm, out, inp, op, algorithm=None, check=False):
    """Block ``rank`` of the reduction over all ranks of ``inp`` (flat, contiguous, size *
    out.numel() elements) into ``out``, with the mpiar operation ``op``; ``inp`` is not modified:
    mpiar's reduce-scatter (reproducible mode, where set, reduces each block in the canonical
    order), with mpiar's argument agreement if ``check``. ``algorithm`` names an allreduce (the
    group's option): the reduce-scatter chooses its own."""
    del algorithm
    mpiar.reduce_scatter_block(inp.detach().reshape(-1), op=op,
                               out=_writable(out).reshape(-1), comm=comm, check=check)


# ---- the staging pool ----------------------------------------------------------------------

class _Pool:
    """A group's kept staging buffer on node-shared memory (``mpiar.alloc`` over the group's
    communicator), on which an allreduce of every rank runs zero-copy. ``take`` is collective: it
    runs on the executor after the ranks agreed on the call (so every rank asks for the same
    bytes) and grows the buffer to the next power of two when it is too small, which frees the
    old one (dropped on every rank, so the next ``alloc`` frees it). The first ``take`` also
    checks that the group is on one node; when it is not, or ``alloc`` fails (on every rank
    alike), the pool turns itself off and ``take`` returns None from then on."""

    def __init__(self, comm):
        self._comm = comm
        self._buf = None
        self.capacity = 0
        self.grows = 0
        self.off = None

    def take(self, nbytes):
        """A flat uint8 tensor of ``nbytes`` on the pool's memory, or None (pool off)."""
        if self.off is None:
            node = self._comm.Split_type(MPI.COMM_TYPE_SHARED)
            self.off = node.Get_size() != self._comm.Get_size()
            node.Free()
        if self.off:
            return None
        if nbytes > self.capacity:
            cap = max(POOL_BYTES, 1 << (nbytes - 1).bit_length())
            self._buf = None
            self.capacity = 0
            try:
                self._buf = mpiar.alloc(cap, dtype=torch.uint8, comm=self._comm, like="torch")
            except (mpiar.Error, ValueError):
                self.off = True
                return None
            self.capacity = cap
            self.grows += 1
        return self._buf[:nbytes]

    def release(self):
        """Drop the buffer: every rank's drop frees it at the communicator's next collective
        point of ``mpiar.alloc`` (``collect``), and ``MPI_Finalize`` frees what is left."""
        self._buf = None
        self.capacity = 0


# ---- works ----------------------------------------------------------------------------------

class Work(dist.Work):
    """The handle of one call of the backend, as gloo's: ``wait()`` blocks until the call is done
    and raises its exception (an ``mpiar.Error`` subclass, e.g. ``MismatchError``), returning
    True; ``is_completed()``, ``is_success()``, ``exception()``; ``get_future()`` a
    ``torch.futures.Future`` completed with the call's output tensors (with an error when the
    call failed)."""

    _event = None
    _fut = None

    def __init__(self, executor, result, keep, done=False, exc=None):
        super().__init__()
        self._executor = executor
        self._result = result
        self._exc = exc
        self._done = done
        self._keep = keep
        if keep is not None:
            keep[id(self)] = self
            if len(keep) > _KEEP_WORKS:
                try:
                    del keep[next(iter(keep))]
                except (KeyError, RuntimeError, StopIteration):  # another thread got there
                    pass

    def _complete(self, exc):
        ex = self._executor
        with ex._lock:
            self._exc = exc
            self._done = True
            ev, fut = self._event, self._fut
        if ev is not None:
            ev.set()
        if fut is not None:
            _finish_future(fut, self)

    def _release(self):
        if self._keep is not None:
            self._keep.pop(id(self), None)

    def wait(self, timeout=datetime.timedelta(0)):
        self._release()
        if not self._done:
            self._executor.wait_for(self, timeout)
        if self._exc is not None:
            raise self._exc
        return True

    def is_completed(self):
        return self._done

    def is_success(self):
        return self._done and self._exc is None

    def exception(self):
        return self._exc

    def source_rank(self):
        return -1

    _source_rank = source_rank

    def result(self):
        return self._result

    def synchronize(self):
        pass

    def get_future(self):
        """The future is made when asked for (a blocking call never makes one)."""
        self._release()
        ex = self._executor
        base = None
        with ex._lock:
            if self._fut is None:
                base = torch.futures.Future()
                # The future handed out errs (for C++ callers too) when the call failed.
                self._fut_out = base.then(_unwrap)
                self._fut = base
            done = self._done
        if base is not None and done:
            _finish_future(base, self)
        return self._fut_out


def _finish_future(fut, work):
    fut.set_result(work._exc if work._exc is not None else work._result)


def _unwrap(fut):
    v = fut.value()
    if isinstance(v, BaseException):
        raise v
    return v


class _Executor:
    """Runs one group's calls in order: in the calling thread when idle and allowed, otherwise on
    a worker thread (or in a thread that waits for a queued call)."""

    def __init__(self, name):
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._queue = collections.deque()
        self._busy = False
        self._thread = None
        self._name = name
        self._closed = False

    def begin(self):
        """Take the executor for a call in the calling thread if it is idle (True; end() gives
        it back); False when calls are queued or running (the caller queues its call instead)."""
        with self._lock:
            if self._busy or self._queue or self._closed:
                return False
            self._busy = True
            return True

    def end(self):
        with self._lock:
            self._busy = False
            if self._queue:
                self._cv.notify_all()

    def run_inline(self, fn):
        """Run ``fn`` in the calling thread if the executor is idle: (True, its exception or None);
        (False, None) when calls are queued or running (the caller queues it instead)."""
        if not self.begin():
            return False, None
        try:
            fn()
            exc = None
        except BaseException as e:  # noqa: BLE001 - handed to wait() and the future
            exc = e
        self.end()
        return True, exc

    def submit(self, work, fn, inline):
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name}: the process group has been destroyed")
            if inline and not self._busy and not self._queue:
                self._busy = True
            elif self._thread is not None and threading.current_thread() is self._thread:
                # A callback of a completed call (run by the worker) makes another call: run the
                # queue here, in order, and this call after it.
                self._busy = True
                pending = list(self._queue)
                self._queue.clear()
                self._lock.release()
                try:
                    for w, f in pending:
                        w._complete(_exec(f))
                finally:
                    self._lock.acquire()
            else:
                work._event = threading.Event()
                self._queue.append((work, fn))
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name=self._name,
                                                    daemon=True)
                    _WORKERS.add(self)
                    self._thread.start()
                self._cv.notify_all()
                return
        exc = _exec(fn)
        self._idle()
        # Completion (and the future's callbacks) after the executor is free, so that a callback
        # may make another call.
        work._complete(exc)

    def _idle(self):
        with self._lock:
            self._busy = False
            self._cv.notify_all()

    def wait_for(self, work, timeout):
        """Wait for a queued work; while it has not started and nothing runs, run the queue up to
        it here instead of waking the worker."""
        while not work._done:
            batch = None
            with self._lock:
                if work._done:
                    break
                if not self._busy and any(w is work for w, _ in self._queue):
                    batch = []
                    while self._queue:
                        w, f = self._queue.popleft()
                        batch.append((w, f))
                        if w is work:
                            break
                    self._busy = True
            if batch is not None:
                done = []
                try:
                    for w, f in batch:
                        done.append((w, _exec(f)))
                finally:
                    self._idle()
                for w, exc in done:
                    w._complete(exc)
                continue
            ev = work._event
            seconds = timeout.total_seconds() if timeout else 0
            if ev is None:
                continue
            if seconds > 0:
                if not ev.wait(seconds):
                    raise RuntimeError(f"{self._name}: wait timed out after {timeout}")
            else:
                ev.wait()

    def _loop(self):
        _worker.active = True
        while True:
            with self._lock:
                while (not self._queue or self._busy) and not (self._closed and not self._queue):
                    self._cv.wait()
                if not self._queue:
                    return
                work, fn = self._queue.popleft()
                self._busy = True
            exc = _exec(fn)
            self._idle()
            work._complete(exc)

    def drain(self, timeout=None):
        """Run everything queued, then stop the worker (waiting at most ``timeout`` seconds for
        it, None: until it has stopped)."""
        with self._lock:
            self._closed = True
            self._cv.notify_all()
            t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
        _WORKERS.discard(self)


#: Executors whose worker thread was started. The exit handler stops each one even when its
#: group is gone by then: a daemon worker still inside a torch call (a future's set_result runs
#: its callbacks with the GIL released) when the interpreter finalizes is ended by Python in a
#: way C++ frames cannot unwind through, which aborts the process after a clean run.
_WORKERS = set()


_worker = threading.local()
_C10D_FILE = dist.distributed_c10d.__file__


def _blocking_caller(depth):
    """True when the frame ``depth`` levels above the caller is one of torch.distributed's
    collective functions called with ``async_op=False``: it waits for the work at once, so the
    call runs in the calling thread, whatever its size (no hand-over to the worker and back).
    Any other caller (DDP's C++ reducer, async_op=True, a direct call of the group's method)
    gets the executor's usual choice."""
    try:
        f = sys._getframe(depth + 1)
    except ValueError:
        return False
    return f.f_code.co_filename == _C10D_FILE and f.f_locals.get("async_op", True) is False


def _allreduce_inplace(t, op, kw):
    """mpiar's allreduce of ``t`` in place. On a group's worker thread it starts the reduction
    and tests it, yielding the core between tests, instead of spinning in a blocking wait: the
    worker runs while the caller computes (DDP's backward pass), and on a node whose cores are
    all busy a spinning wait takes them from that computation."""
    if getattr(_worker, "active", False):
        req = mpiar.iallreduce(t, op=op, out=t, **kw)
        while not req.test():
            _yield()
    else:
        mpiar.allreduce(t, op=op, out=t, **kw)


def _exec(fn):
    """Run one call; its exception, or None."""
    try:
        fn()
        return None
    except BaseException as e:  # noqa: BLE001 - handed to wait() and the future
        return e


# ---- the process group ----------------------------------------------------------------------

class ProcessGroupMpiar(dist.ProcessGroup):
    """A process group over an mpi4py intracommunicator (see the module's documentation).

    ``check`` (default True): agree on the arguments before every call (one small allreduce).
    ``inline_bytes``: the size up to which an idle group runs a call in the calling thread.
    ``timeout_ms``: mpiar's deadline of every call (None: the library's default or
    ``MPIAR_TIMEOUT_MS``). ``algorithm``: the allreduce algorithm of the reductions (None:
    automatic, or ``MPIAR_ALGORITHM``). ``pool_bytes`` (default ``POOL_BYTES``, 1 MiB; 0 turns
    it off): the staging size from which allreduce_coalesced and the list forms of allgather
    and reduce_scatter stage in the group's node-shared pool (``_Pool``);
    ``pool_allreduce_bytes`` and ``pool_allreduce_max_bytes`` (default 1 MiB and 16 MiB; 0 turns
    it off): the sizes of the all_reduce calls staged there; ``pool_allgather_bytes`` (default
    4 MiB): the input size from which the list form of allgather stages there. With
    ``init_process_group("mpiar", pg_options={...})`` (and
    ``new_group``) a dict of these keywords reaches the group."""

    def __init__(self, comm, timeout_ms=None, check=True, inline_bytes=None, algorithm=None,
                 pool_bytes=None, pool_allreduce_bytes=None, pool_allreduce_max_bytes=None,
                 pool_allgather_bytes=None):
        super().__init__(comm.Get_rank(), comm.Get_size())
        self.comm = comm
        self._p2p = comm.Dup()
        self._rank = comm.Get_rank()
        self._size = comm.Get_size()
        self.check = check
        self.inline_bytes = INLINE_BYTES if inline_bytes is None else int(inline_bytes)
        self.timeout_ms = timeout_ms
        self.algorithm = algorithm
        self._ex = _Executor(f"mpiar process group (rank {self._rank} of {self._size})")
        self._keep = {}
        self._agree_buf = np.zeros(2 * len(_FIELDS), dtype=np.uint64)
        self._plans = {}
        self._kw_key = self._kw_cache = None
        self.pool_bytes = POOL_BYTES if pool_bytes is None else int(pool_bytes)
        self.pool_allreduce_bytes = (POOL_ALLREDUCE_BYTES if pool_allreduce_bytes is None
                                     else int(pool_allreduce_bytes))
        self.pool_allgather_bytes = (POOL_ALLGATHER_BYTES if pool_allgather_bytes is None
                                     else int(pool_allgather_bytes))
        self.pool_allreduce_max_bytes = (POOL_ALLREDUCE_MAX_BYTES
                                         if pool_allreduce_max_bytes is None
                                         else int(pool_allreduce_max_bytes))
        self._pool = _Pool(comm)
        _LIVE.add(self)

    def getBackendName(self):
        return "mpiar"

    def _get_backend_name(self):
        return "mpiar"

    def __repr__(self):
        return f"ProcessGroupMpiar(rank={self._rank}, size={self._size})"

    # -- machinery --

    def _join_failed(self):
        """This rank's arguments failed their local checks: take part in the agreement that the
        other ranks are in (mpiar's, at the start of their data call or of ``_agree``) as a rank
        that failed, so that they raise MismatchError naming it; no data moves. An argument that
        mpiar's own checks reject (None) makes mpiar's call do just that."""
        if self.check:
            try:
                mpiar.allreduce(None, comm=self.comm, timeout_ms=self.timeout_ms)
            except Exception:  # noqa: BLE001 - the local exception is the one raised
                pass

    def _agree(self, fname, fields):
        """The argument agreement of the collectives whose data call has no agreement of its own
        (see the module's documentation): mpiar's allreduce (max) of each field and its
        complement, after mpiar's own agreement on that call, which every call of the group
        begins with, so that any two calls made in the same place on different ranks meet there.
        The buffer is uint64, which no torch tensor is, so it never agrees with a data call."""
        buf = self._agree_buf
        n = len(_FIELDS)
        for i, v in enumerate(fields):
            buf[i] = v
            buf[n + i] = ~v & _MASK
        mpiar.allreduce(buf, op="max", out=buf, comm=self.comm, timeout_ms=self.timeout_ms)
        for i in range(n):
            lo, hi = ~int(buf[n + i]) & _MASK, int(buf[i])
            if lo != hi:
                what = _FIELDS[i]
                detail = ""
                if i == 0:
                    detail = f" ({_KIND_NAME.get(lo)} and {_KIND_NAME.get(hi)} among them)"
                elif i in (3, 4):
                    detail = f" ({lo} and {hi} among them)"
                raise mpiar.MismatchError(f"{fname}: the {what} differs between ranks{detail}; "
                                          "no data moved")

    def _call(self, fname, result, prepare, body, nbytes, agree=True):
        """One call: local checks (``prepare`` returns the agreement's fields, or raises), then
        on the executor the agreement (``agree``: for a ``body`` whose data call has none of its
        own) and ``body``. A local failure still takes part in the agreement, so that the other
        ranks raise MismatchError instead of waiting, and raises here."""
        fields = self._checked(prepare)
        if agree and self.check:
            def run():
                self._agree(fname, fields)
                body()
        else:
            run = body
        return self._submit(result, run, nbytes)

    def _submit(self, result, fn, nbytes):
        """Run ``fn`` on the executor: at once in this thread (a completed work) when the
        executor is idle and ``nbytes`` is at most ``inline_bytes`` or the caller is a blocking
        torch.distributed call (_blocking_caller: the public method, called by _call, called
        here), else queued."""
        ex = self._ex
        if nbytes <= self.inline_bytes or _blocking_caller(3):
            ran, exc = ex.run_inline(fn)
            if ran:
                return Work(ex, result, self._keep, True, exc)
        w = Work(ex, result, self._keep)
        ex.submit(w, fn, False)
        return w

    def _checked(self, prepare):
        """``prepare()``'s value; when it raises, this rank joins the agreement as a rank that
        failed (``_join_failed``), and the exception propagates."""
        try:
            return prepare()
        except Exception:
            self._join_failed()
            raise

    def _reduce_plan(self, t, op, fname):
        """(the mpiar operation, the element size) of a reduction of tensor ``t`` with torch's
        ``op``, after the local checks of ``t``; cached per (dtype, op), so that a repeated call
        checks only the tensor's device, layout and contiguity."""
        if not isinstance(t, torch.Tensor) or not (t.is_cpu and t.layout == torch.strided
                                                   and t.is_contiguous()):
            _check_tensor(t, "the tensor", fname, reduce_dtype=True)
        # hash(op) is the operation's number (torch's ReduceOp compares slowly, in Python's
        # terms: a key holding the ReduceOp itself costs more than the rest of the call).
        key = (t.dtype, hash(op))
        plan = self._plans.get(key)
        if plan is None:
            _check_tensor(t, "the tensor", fname, reduce_dtype=True)
            plan = self._plans[key] = (_op_name(op, t.dtype, fname), t.element_size())
        return plan

    def _mpiar_kw(self, reduce=True, check=False):
        """The keywords of a data call: the group's deadline and algorithm (reductions), and
        mpiar's own argument agreement where ``check`` and the group's check are on."""
        kw = {"comm": self.comm, "check": check and self.check, "timeout_ms": self.timeout_ms}
        if reduce and self.algorithm is not None:
            kw["algorithm"] = self.algorithm
        return kw

    @property
    def _kw(self):
        """_mpiar_kw() of a reduction, made again only when check, timeout_ms or algorithm
        changed."""
        key = (self.check, self.timeout_ms, self.algorithm)
        if self._kw_key != key:
            self._kw_cache = self._mpiar_kw(check=True)
            self._kw_key = key
        return self._kw_cache

    def _root(self, opts, fname):
        root = opts.rootRank
        if not 0 <= root < self._size:
            raise ValueError(f"{fname}: root {root} is not a rank of this group of {self._size}")
        if getattr(opts, "rootTensor", 0) != 0:
            raise ValueError(f"{fname}: rootTensor must be 0 (one tensor per rank)")
        return root

    @staticmethod
    def _one(tensors, fname):
        if len(tensors) != 1:
            raise ValueError(f"{fname}: the mpiar backend takes one tensor per rank, got "
                             f"{len(tensors)}")
        return tensors[0]

    # -- reductions on mpiar --

    def allreduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else _R.SUM
        try:
            t = tensors[0] if len(tensors) == 1 else self._one(tensors, "allreduce")
            name, esize = self._reduce_plan(t, op, "allreduce")
        except Exception:
            self._join_failed()
            raise
        if t.requires_grad:
            t = t.detach()
        kw = self._kw
        ex = self._ex
        nbytes = t.numel() * esize
        if (0 < self.pool_allreduce_bytes <= nbytes <= self.pool_allreduce_max_bytes
                and not self._pool.off):
            return self._allreduce_pooled(tensors, t, op, name, nbytes)
        if (nbytes <= self.inline_bytes or _blocking_caller(1)) and ex.begin():
            # The common small call, written out: no closure, one C call, a completed work.
            try:
                mpiar.allreduce(t, op=name, out=t, **kw)
                exc = None
            except BaseException as e:  # noqa: BLE001 - handed to wait() and the future
                exc = e
            ex.end()
            return Work(ex, tensors, self._keep, True, exc)

        def body():
            _allreduce_inplace(t, name, kw)

        w = Work(ex, tensors, self._keep)
        ex.submit(w, body, False)
        return w

    def _staged(self, fname, fields, nbytes):
        """The pool's buffer of ``nbytes`` for a call whose fields the ranks agree on first (so
        that every rank grows the pool alike; a mismatch raises MismatchError on every rank
        before the pool is touched), or None when the pool is off. On the executor."""
        if self.check:
            self._agree(fname, fields)
        return self._pool.take(nbytes)

    def _take(self, nbytes):
        """The pool's buffer of ``nbytes`` for a call of at least ``pool_bytes`` whose ranks have
        agreed (``_call``'s agreement), else None. On the executor."""
        return self._pool.take(nbytes) if 0 < self.pool_bytes <= nbytes else None

    def _allreduce_pooled(self, tensors, t, op, name, nbytes):
        """A large all_reduce through the pool: the tensor is copied into the pool's buffer,
        reduced there in place (every rank's buffer is node-shared: mpiar's zero-copy path) and
        copied back. The agreement is ``_agree``'s, before the pool grows; the data call then
        skips its own."""
        fields = (_ALLREDUCE, _DTYPE_CODE[t.dtype], _OP_CODE[_OPS[op]], 0, t.numel(), 0)
        kw = self._mpiar_kw()
        flat = t.view(-1)

        def body():
            s = self._staged("allreduce", fields, nbytes)
            if s is None:
                _allreduce_inplace(t, name, kw)
                return
            s = s.view(t.dtype)
            s.copy_(flat)
            _allreduce_inplace(s, name, kw)
            flat.copy_(s)

        return self._submit(tensors, body, nbytes)

    def allreduce_coalesced(self, tensors, opts=None):
        fname = "allreduce_coalesced"
        op = opts.reduceOp if opts is not None else _R.SUM
        state = {}

        def prepare():
            if not tensors:
                raise ValueError(f"{fname}: no tensors")
            for i, t in enumerate(tensors):
                _check_tensor(t, f"tensor {i}", fname, reduce_dtype=True)
                if t.dtype != tensors[0].dtype:
                    raise TypeError(f"{fname}: tensors of different dtypes ({tensors[0].dtype} "
                                    f"and {t.dtype})")
            state["op"] = _op_name(op, tensors[0].dtype, fname)
            total = sum(t.numel() for t in tensors)
            return (_COALESCED, _DTYPE_CODE[tensors[0].dtype], _OP_CODE[_OPS[op]], 0, total,
                    _fingerprint(tuple(t.shape) for t in tensors))

        def body():
            s = self._take(sum(t.numel() for t in tensors) * tensors[0].element_size())
            if s is None:
                flat = torch.cat([t.detach().reshape(-1) for t in tensors])
            else:
                # Staged in the pool (after _call's agreement, so every rank takes alike).
                flat = s.view(tensors[0].dtype)
                torch.cat([t.detach().reshape(-1) for t in tensors], out=flat)
            _allreduce_inplace(flat, state["op"], self._mpiar_kw())
            off = 0
            for t in tensors:
                n = t.numel()
                _writable(t).view(-1).copy_(flat[off:off + n])
                off += n

        nbytes = sum(t.numel() * t.element_size() for t in tensors
                     if isinstance(t, torch.Tensor))
        return self._call(fname, tensors, prepare, body, nbytes)

    def reduce(self, tensors, opts=None):
        fname = "reduce"
        op = opts.reduceOp
        state = {}

        def prepare():
            t = self._one(tensors, fname)
            _check_tensor(t, "the tensor", fname, reduce_dtype=True)
            state["op"] = _op_name(op, t.dtype, fname)
            root = self._root(opts, fname)
            state["root"] = root
            return (_REDUCE, _DTYPE_CODE[t.dtype], _OP_CODE[_OPS[op]], root, t.numel(), 0)

        def body():
            t = tensors[0]
            if self._rank == state["root"]:
                tw = _writable(t)
                mpiar.allreduce(tw, op=state["op"], out=tw, **self._mpiar_kw())
            else:
                tmp = torch.empty_like(t)
                mpiar.allreduce(t.detach(), op=state["op"], out=tmp, **self._mpiar_kw())

        return self._call(fname, tensors, prepare, body, _nbytes(tensors))

    def broadcast(self, tensors, opts=None):
        fname = "broadcast"
        state = {}

        def prepare():
            t = self._one(tensors, fname)
            _check_tensor(t, "the tensor", fname)
            root = self._root(opts, fname)
            state["root"] = root
            return (_BROADCAST, _DTYPE_CODE[t.dtype], 0, root, t.numel(), 0)

        def body():
            t = tensors[0]
            b = _bytes(t) if t.dtype not in _RED_DTYPES else _writable(t)
            mpiar.bcast(b, root=state["root"], **self._mpiar_kw(False, True))

        return self._call(fname, tensors, prepare, body, _nbytes(tensors), agree=False)

    def barrier(self, opts=None):
        fname = "barrier"

        def prepare():
            return (_BARRIER, 0, 0, 0, 0, 0)

        def body():
            self._agree(fname, (_BARRIER, 0, 0, 0, 0, 0))

        return self._call(fname, [], prepare, body, 0, agree=False)

    # -- all_gather and reduce_scatter --

    def _allgather_base(self, output, input, opts=None):  # noqa: A002 - torch's name
        fname = "_allgather_base"

        def prepare():
            _check_tensor(input, "the input", fname)
            _check_tensor(output, "the output", fname)
            if output.dtype != input.dtype:
                raise TypeError(f"{fname}: the output's dtype {output.dtype} differs from the "
                                f"input's {input.dtype}")
            if output.numel() != input.numel() * self._size:
                raise ValueError(f"{fname}: the output has {output.numel()} elements, not "
                                 f"{self._size} x {input.numel()}")
            return (_ALLGATHER, _DTYPE_CODE[input.dtype], 0, 0, input.numel(), 0)

        def body():
            allgather_into(self.comm, output.detach().reshape(-1), input.detach().reshape(-1),
                           self.algorithm, self.check)

        return self._call(fname, [output], prepare, body, _nbytes([output]), agree=False)

    def allgather(self, output_tensors, input_tensors, opts=None):
        fname = "allgather"

        def prepare():
            inp = self._one(input_tensors, fname)
            outs = self._one(output_tensors, fname)
            _check_tensor(inp, "the input", fname)
            if len(outs) != self._size:
                raise ValueError(f"{fname}: {len(outs)} output tensors for a group of "
                                 f"{self._size}")
            for i, o in enumerate(outs):
                _check_tensor(o, f"output {i}", fname)
                if o.dtype != inp.dtype or o.numel() != inp.numel():
                    raise ValueError(f"{fname}: output {i} ({o.dtype}, {o.numel()} elements) "
                                     f"does not match the input ({inp.dtype}, {inp.numel()})")
            return (_ALLGATHER, _DTYPE_CODE[inp.dtype], 0, 0, inp.numel(), 0)

        def body():
            inp = input_tensors[0]
            n = inp.numel()
            s = None
            if n * inp.element_size() >= self.pool_allgather_bytes:
                s = self._take(n * inp.element_size() * (self._size + 1))
            if s is None:
                flat = torch.empty(n * self._size, dtype=inp.dtype)
                src = inp.detach().reshape(-1)
            else:
                # Output and input in the pool (after _call's agreement): mpiar's zero-copy path.
                s = s.view(inp.dtype)
                flat, src = s[:n * self._size], s[n * self._size:]
                src.copy_(inp.detach().reshape(-1))
            allgather_into(self.comm, flat, src, self.algorithm)
            for i, o in enumerate(output_tensors[0]):
                _writable(o).view(-1).copy_(flat[i * n:(i + 1) * n])

        outs = output_tensors[0] if len(output_tensors) == 1 else []
        return self._call(fname, list(outs), prepare, body, _nbytes(outs))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        fname = "allgather_coalesced"

        def prepare():
            if len(output_lists) != self._size:
                raise ValueError(f"{fname}: {len(output_lists)} output lists for a group of "
                                 f"{self._size}")
            for i, t in enumerate(input_list):
                _check_tensor(t, f"input {i}", fname)
            for lst in output_lists:
                if len(lst) != len(input_list):
                    raise ValueError(f"{fname}: an output list of {len(lst)} tensors for "
                                     f"{len(input_list)} inputs")
            return (_ALLGATHER, 0, 0, 0, sum(t.numel() * t.element_size() for t in input_list),
                    _fingerprint((str(t.dtype), tuple(t.shape)) for t in input_list))

        def body():
            flat_in = torch.cat([_bytes(t) for t in input_list]) if input_list else \
                torch.empty(0, dtype=torch.uint8)
            m = flat_in.numel()
            flat = torch.empty(m * self._size, dtype=torch.uint8)
            allgather_into(self.comm, flat, flat_in, self.algorithm)
            for r, lst in enumerate(output_lists):
                off = r * m
                for o in lst:
                    nb = o.numel() * o.element_size()
                    _bytes(_writable(o)).copy_(flat[off:off + nb])
                    off += nb

        outs = [o for lst in output_lists for o in lst]
        return self._call(fname, outs, prepare, body, _nbytes(outs))

    def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002 - torch's name
        fname = "_reduce_scatter_base"
        op = opts.reduceOp if opts is not None else _R.SUM
        state = {}

        def prepare():
            _check_tensor(input, "the input", fname, reduce_dtype=True)
            _check_tensor(output, "the output", fname, reduce_dtype=True)
            if output.dtype != input.dtype:
                raise TypeError(f"{fname}: the output's dtype {output.dtype} differs from the "
                                f"input's {input.dtype}")
            if input.numel() != output.numel() * self._size:
                raise ValueError(f"{fname}: the input has {input.numel()} elements, not "
                                 f"{self._size} x {output.numel()}")
            state["op"] = _op_name(op, input.dtype, fname)
            return (_REDUCE_SCATTER, _DTYPE_CODE[input.dtype], _OP_CODE[_OPS[op]], 0,
                    output.numel(), 0)

        def body():
            reduce_scatter_into(self.comm, output, input.detach().reshape(-1), state["op"],
                                self.algorithm, self.check)

        return self._call(fname, [output], prepare, body, _nbytes([input]), agree=False)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        fname = "reduce_scatter"
        op = opts.reduceOp if opts is not None else _R.SUM
        state = {}

        def prepare():
            out = self._one(output_tensors, fname)
            ins = self._one(input_tensors, fname)
            _check_tensor(out, "the output", fname, reduce_dtype=True)
            if len(ins) != self._size:
                raise ValueError(f"{fname}: {len(ins)} input tensors for a group of "
                                 f"{self._size}")
            for i, t in enumerate(ins):
                _check_tensor(t, f"input {i}", fname, reduce_dtype=True)
                if t.dtype != out.dtype or t.numel() != out.numel():
                    raise ValueError(f"{fname}: input {i} ({t.dtype}, {t.numel()} elements) "
                                     f"does not match the output ({out.dtype}, {out.numel()})")
            state["op"] = _op_name(op, out.dtype, fname)
            return (_REDUCE_SCATTER, _DTYPE_CODE[out.dtype], _OP_CODE[_OPS[op]], 0, out.numel(),
                    0)

        def body():
            out = output_tensors[0]
            n = out.numel()
            s = self._take(n * out.element_size() * (self._size + 1))
            if s is None:
                flat = torch.cat([t.detach().reshape(-1) for t in input_tensors[0]])
                reduce_scatter_into(self.comm, out, flat, state["op"], self.algorithm)
                return
            # Input and output in the pool (after _call's agreement): mpiar's zero-copy path.
            s = s.view(out.dtype)
            flat, block = s[:n * self._size], s[n * self._size:]
            torch.cat([t.detach().reshape(-1) for t in input_tensors[0]], out=flat)
            reduce_scatter_into(self.comm, block, flat, state["op"], self.algorithm)
            _writable(out).view(-1).copy_(block)

        return self._call(fname, output_tensors, prepare, body,
                          _nbytes(input_tensors[0]) if len(input_tensors) == 1 else 0)

    # -- data movement through mpi4py --

    def _check_root_list(self, lists, like, root, which, fname):
        """gather's outputs or scatter's inputs (``which``): at the root one list of a tensor per
        rank, each of ``like``'s dtype and size; elsewhere none."""
        other = "input" if which == "output" else "output"
        if self._rank != root:
            if lists and any(len(x) for x in lists):
                raise ValueError(f"{fname}: only the root (rank {root}) passes {which} tensors")
            return
        tensors = self._one(lists, fname)
        if len(tensors) != self._size:
            raise ValueError(f"{fname}: {len(tensors)} {which} tensors for a group of "
                             f"{self._size}")
        for i, t in enumerate(tensors):
            _check_tensor(t, f"{which} {i}", fname)
            if t.dtype != like.dtype or t.numel() != like.numel():
                raise ValueError(f"{fname}: {which} {i} does not match the {other}")

    def gather(self, output_tensors, input_tensors, opts=None):
        fname = "gather"
        state = {}

        def prepare():
            inp = self._one(input_tensors, fname)
            _check_tensor(inp, "the input", fname)
            root = self._root(opts, fname)
            state["root"] = root
            self._check_root_list(output_tensors, inp, root, "output", fname)
            return (_GATHER, _DTYPE_CODE[inp.dtype], 0, root, inp.numel(), 0)

        def body():
            inp = input_tensors[0]
            nb = inp.numel() * inp.element_size()
            if self._rank == state["root"]:
                flat = torch.empty(nb * self._size, dtype=torch.uint8)
                self.comm.Gather(_np_bytes(inp), flat.numpy(), root=state["root"])
                for i, o in enumerate(output_tensors[0]):
                    _bytes(_writable(o)).copy_(flat[i * nb:(i + 1) * nb])
            else:
                self.comm.Gather(_np_bytes(inp), None, root=state["root"])

        outs = output_tensors[0] if len(output_tensors) == 1 else []
        return self._call(fname, list(outs), prepare, body, _nbytes(input_tensors))

    def scatter(self, output_tensors, input_tensors, opts=None):
        fname = "scatter"
        state = {}

        def prepare():
            out = self._one(output_tensors, fname)
            _check_tensor(out, "the output", fname)
            root = self._root(opts, fname)
            state["root"] = root
            self._check_root_list(input_tensors, out, root, "input", fname)
            return (_SCATTER, _DTYPE_CODE[out.dtype], 0, root, out.numel(), 0)

        def body():
            out = _writable(output_tensors[0])
            if self._rank == state["root"]:
                flat = torch.cat([_bytes(t) for t in input_tensors[0]])
                self.comm.Scatter(flat.numpy(), _np_bytes(out), root=state["root"])
            else:
                self.comm.Scatter(None, _np_bytes(out), root=state["root"])

        return self._call(fname, output_tensors, prepare, body, _nbytes(output_tensors))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes,  # noqa: A002
                      opts=None):
        fname = "alltoall_base"
        state = {}

        def splits(t, sizes, what):
            if not sizes:
                if t.shape[0] % self._size if t.dim() else True:
                    raise ValueError(f"{fname}: the {what}'s first dimension is not divisible "
                                     f"by the group size {self._size}")
                sizes = [t.shape[0] // self._size] * self._size
            if len(sizes) != self._size or sum(sizes) != (t.shape[0] if t.dim() else 0):
                raise ValueError(f"{fname}: the {what} split sizes {list(sizes)} do not cover "
                                 f"its first dimension ({t.shape[0] if t.dim() else 0}) for "
                                 f"{self._size} ranks")
            row = (t.numel() // t.shape[0] if t.shape[0] else 0) * t.element_size()
            counts = [s * row for s in sizes]
            displs = [sum(counts[:i]) for i in range(self._size)]
            return counts, displs

        def prepare():
            _check_tensor(input, "the input", fname)
            _check_tensor(output, "the output", fname)
            if input.dtype != output.dtype:
                raise TypeError(f"{fname}: the output's dtype {output.dtype} differs from the "
                                f"input's {input.dtype}")
            state["in"] = splits(input, list(input_split_sizes), "input")
            state["out"] = splits(output, list(output_split_sizes), "output")
            return (_ALLTOALL, _DTYPE_CODE[input.dtype], 0, 0, 0, 0)

        def body():
            sc, sd = state["in"]
            rc, rd = state["out"]
            self.comm.Alltoallv([_np_bytes(input), (sc, sd), MPI.BYTE],
                                [_np_bytes(_writable(output)), (rc, rd), MPI.BYTE])

        return self._call(fname, [output], prepare, body, _nbytes([output]))

    def alltoall(self, output_tensors, input_tensors, opts=None):
        fname = "alltoall"

        def prepare():
            for what, lst in (("input", input_tensors), ("output", output_tensors)):
                if len(lst) != self._size:
                    raise ValueError(f"{fname}: {len(lst)} {what} tensors for a group of "
                                     f"{self._size}")
                for i, t in enumerate(lst):
                    _check_tensor(t, f"{what} {i}", fname)
            return (_ALLTOALL, _DTYPE_CODE[input_tensors[0].dtype], 0, 0, 0, 0)

        def body():
            sc = [t.numel() * t.element_size() for t in input_tensors]
            rc = [t.numel() * t.element_size() for t in output_tensors]
            sd = [sum(sc[:i]) for i in range(self._size)]
            rd = [sum(rc[:i]) for i in range(self._size)]
            send = torch.cat([_bytes(t) for t in input_tensors])
            recv = torch.empty(sum(rc), dtype=torch.uint8)
            self.comm.Alltoallv([send.numpy(), (sc, sd), MPI.BYTE],
                                [recv.numpy(), (rc, rd), MPI.BYTE])
            for i, o in enumerate(output_tensors):
                _bytes(_writable(o)).copy_(recv[rd[i]:rd[i] + rc[i]])

        return self._call(fname, output_tensors, prepare, body, _nbytes(output_tensors))

    # -- point to point (nonblocking MPI, independent of the executor's order) --

    def _p2p_check(self, tensors, peer, fname):
        t = self._one(tensors, fname)
        _check_tensor(t, "the tensor", fname)
        if peer is not None and not 0 <= peer < self._size:
            raise ValueError(f"{fname}: rank {peer} is not a rank of this group of {self._size}")
        return t

    def send(self, tensors, dstRank, tag):  # noqa: N803 - torch's names
        t = self._p2p_check(tensors, dstRank, "send")
        req = self._p2p.Isend(_np_bytes(t), dest=dstRank, tag=tag)
        return _P2PWork(req, tensors, t, None)

    def recv(self, tensors, srcRank, tag):  # noqa: N803
        t = self._p2p_check(tensors, srcRank, "recv")
        buf = _np_bytes(_writable(t))
        status = MPI.Status()
        req = self._p2p.Irecv(buf, source=srcRank, tag=tag)
        return _P2PWork(req, tensors, t, status)

    def recv_anysource(self, tensors, tag):
        t = self._p2p_check(tensors, None, "recv_anysource")
        status = MPI.Status()
        req = self._p2p.Irecv(_np_bytes(_writable(t)), source=MPI.ANY_SOURCE, tag=tag)
        return _P2PWork(req, tensors, t, status)

    # -- lifetime --

    def _shutdown(self):
        self._ex.drain()
        self._pool.release()


def _nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


class _P2PWork(dist.Work):
    """A send or receive: an MPI request; wait() and is_completed() test it."""

    def __init__(self, req, result, tensor, status):
        super().__init__()
        self._req = req
        self._result = result
        self._tensor = tensor  # kept alive until the transfer completes
        self._status = status
        self._done = False
        self._src = -1
        _P2P_KEEP[id(self)] = self
        if len(_P2P_KEEP) > _KEEP_WORKS:
            del _P2P_KEEP[next(iter(_P2P_KEEP))]

    def _finished(self):
        self._done = True
        if self._status is not None:
            self._src = self._status.Get_source()
        _P2P_KEEP.pop(id(self), None)

    def wait(self, timeout=datetime.timedelta(0)):
        if not self._done:
            if self._status is not None:
                self._req.Wait(self._status)
            else:
                self._req.Wait()
            self._finished()
        return True

    def is_completed(self):
        if not self._done:
            if self._req.Test(self._status) if self._status is not None else self._req.Test():
                self._finished()
        return self._done

    def is_success(self):
        return self.is_completed()

    def exception(self):
        return None

    def source_rank(self):
        return self._src

    _source_rank = source_rank

    def result(self):
        return self._result

    def synchronize(self):
        pass

    def get_future(self):
        fut = torch.futures.Future()
        if self.is_completed():
            fut.set_result(self._result)
        else:
            def finish():
                self.wait()
                fut.set_result(self._result)
            threading.Thread(target=finish, daemon=True).start()
        return fut


_P2P_KEEP = {}
_LIVE = __import__("weakref").WeakSet()


# ---- registration ---------------------------------------------------------------------------

_creation_comm = None


def _create(opts, pg_options=None):
    """The backend's creator (torch's extended API): the default group over MPI_COMM_WORLD, whose
    rank and size the store's must equal, or a subgroup of it."""
    global _creation_comm
    world = MPI.COMM_WORLD
    if _creation_comm is None:
        _creation_comm = world.Dup()
    ranks = list(opts.global_ranks_in_group)
    timeout_ms = None
    if opts.timeout != dist.default_pg_timeout:
        timeout_ms = int(opts.timeout.total_seconds() * 1000)
    if not ranks:
        if opts.group_rank != world.Get_rank() or opts.group_size != world.Get_size():
            raise ValueError(f"init_process_group: the mpiar backend takes rank and size from "
                             f"MPI (rank {world.Get_rank()} of {world.Get_size()}), but was given "
                             f"rank {opts.group_rank} of {opts.group_size}")
        comm = world.Dup()
    else:
        group = _creation_comm.Get_group().Incl(ranks)
        comm = _creation_comm.Create_group(group, tag=_fingerprint(ranks) % 32768)
        group.Free()
        if comm.Get_rank() != opts.group_rank or comm.Get_size() != opts.group_size:
            raise ValueError(f"new_group: MPI made rank {comm.Get_rank()} of {comm.Get_size()}, "
                             f"torch expects rank {opts.group_rank} of {opts.group_size}")
    kwargs = {"timeout_ms": timeout_ms}
    if pg_options is not None:
        if not isinstance(pg_options, dict):
            raise TypeError("the mpiar backend's pg_options is a dict of ProcessGroupMpiar "
                            f"keywords, not a {type(pg_options).__name__}")
        kwargs.update(pg_options)
    return ProcessGroupMpiar(comm, **kwargs)


def _mpi_rendezvous(url, rank=-1, world_size=-1, timeout=dist.default_pg_timeout, **kwargs):
    """env:// without MASTER_ADDR, MASTER_PORT, RANK or WORLD_SIZE: rank and size from MPI, and a
    TCPStore that rank 0 opens on a free port and announces to the others through MPI."""
    world = MPI.COMM_WORLD
    r, n = world.Get_rank(), world.Get_size()
    if rank not in (-1, r) or world_size not in (-1, n):
        raise ValueError(f"init_process_group: rank {rank} of {world_size} given, but MPI says "
                         f"rank {r} of {n}")
    if r == 0:
        store = dist.TCPStore("0.0.0.0", 0, n, True, timeout, wait_for_workers=False)
        addr = (socket.gethostname(), store.port)
    else:
        addr = None
    addr = world.bcast(addr, root=0)
    if r != 0:
        local = socket.gethostname() == addr[0]
        store = dist.TCPStore("127.0.0.1" if local else addr[0], addr[1], n, False, timeout)
    yield store, r, n
    raise RuntimeError("the MPI rendezvous cannot be repeated")


def _install():
    import importlib
    rdzv = importlib.import_module("torch.distributed.rendezvous")
    import os

    dist.Backend.register_backend("mpiar", _create, extended_api=True)
    original = rdzv._rendezvous_handlers.get("env")
    if original is None or getattr(original, "_mpiar", False):
        return

    def env_or_mpi(url, **kwargs):
        query = dict(kv.split("=", 1) for kv in url.partition("?")[2].split("&") if "=" in kv)
        rank = int(query.get("rank", os.environ.get("RANK") or -1))
        size = int(query.get("world_size", os.environ.get("WORLD_SIZE") or -1))
        if (os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT") and rank >= 0
                and size > 0):
            return original(url, **kwargs)
        return _mpi_rendezvous(url, rank, size, **kwargs)

    env_or_mpi._mpiar = True
    rdzv._rendezvous_handlers["env"] = env_or_mpi


def _drain_all():
    for pg in list(_LIVE):
        try:
            pg._shutdown()
        except Exception:  # noqa: BLE001 - at exit
            pass
    for ex in list(_WORKERS):
        ex.drain(_EXIT_JOIN_SECONDS)


#: How long the exit handler waits for a worker still running a call (whose own deadline ends
#: it): past that the process exits without waiting for it.
_EXIT_JOIN_SECONDS = 60.0


__import__("atexit").register(_drain_all)
