"""Data-parallel PyTorch training with mpiar.

- ``broadcast_parameters(params, root=0, comm=None)``: make every rank's tensors root's, in place
  (a ``state_dict()`` or ``named_parameters()``).
- ``broadcast_optimizer_state(optimizer, root=0, comm=None)``: make every rank's optimizer state
  (momentum buffers, step counts, hyper-parameters) root's.
- ``DistributedOptimizer(optimizer, named_parameters=None, comm=None, op="avg",
  fusion_bytes=None, overlap=True, bucket_bytes=None, backward_passes_per_step=1, verify=True)``:
  the optimizer, whose ``step()`` first averages every parameter's gradient over the ranks. With
  ``overlap=True`` (the default) the averaging starts during the backward pass: gradient hooks
  start asynchronous pushpulls of buckets of gradients as they become ready, and ``step()`` waits
  for them. With ``overlap=False`` ``step()`` averages them all with one fused pushpull.
- The ``torch.distributed`` backend ``"mpiar"``, registered by this import:
  ``dist.init_process_group("mpiar")`` under ``mpiexec`` (rank and size from MPI) gives a process
  group (``ProcessGroupMpiar``) on which every CPU collective of ``torch.distributed`` runs, and
  ``DistributedDataParallel`` and ``ZeroRedundancyOptimizer`` with it; see ``mpiar._c10d``.
- ``allreduce_hook(state, bucket)``: a DDP communication hook that averages the gradient buckets
  with mpiar, for DDP on any backend (``ddp.register_comm_hook(None, allreduce_hook)``).

Every function is collective over ``comm`` (``MPI.COMM_WORLD`` by default): every rank calls it,
with the same parameters in the same order.
"""

import collections
import io
import weakref
from collections.abc import Mapping

import numpy as np
import torch

import mpiar
from mpiar import _c10d
from mpiar._c10d import ProcessGroupMpiar, Work

__all__ = ["broadcast_parameters", "broadcast_optimizer_state", "DistributedOptimizer",
           "ProcessGroupMpiar", "Work", "allreduce_hook"]

_c10d._install()

_hook_groups = {}


def allreduce_hook(state, bucket):
    """DDP communication hook: the average of the bucket's gradients over the ranks, with mpiar,
    whatever backend the DDP model's process group uses.

    ``ddp_model.register_comm_hook(state, mpiar.torch.allreduce_hook)``, where ``state`` is None
    (``MPI.COMM_WORLD``), an mpi4py communicator, or a ``ProcessGroupMpiar``; its ranks must be the
    DDP group's. The reduction starts at once and runs while the backward pass goes on (as the
    backend's ``all_reduce(async_op=True)``); the returned future completes with the averaged
    bucket, in place.
    """
    if isinstance(state, ProcessGroupMpiar):
        pg = state
    else:
        comm = state if state is not None else mpiar._MPI.COMM_WORLD
        key = mpiar._MPI._handleof(comm) if hasattr(mpiar._MPI, "_handleof") else id(comm)
        pg = _hook_groups.get(key)
        if pg is None:
            pg = _hook_groups[key] = ProcessGroupMpiar(comm)
    opts = torch.distributed.AllreduceOptions()
    opts.reduceOp = torch.distributed.ReduceOp.AVG
    work = pg.allreduce([bucket.buffer()], opts)
    return work.get_future().then(lambda fut: fut.value()[0])


def _fingerprint(entries):
    """A 62-bit hash of (name, dtype, shape) entries, the same on every rank for the same model."""
    h = 14695981039346656037
    for name, dtype, shape in entries:
        for byte in repr((str(name), str(dtype), tuple(shape))).encode():
            h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h >> 2


def _agree(value, comm, what):
    """Raise MismatchError on every rank unless every rank passes the same integer value."""
    both = np.array([value, -value], dtype=np.int64)
    mpiar.allreduce(both, op="max", out=both, comm=comm)
    if both[0] != -both[1]:
        raise mpiar.MismatchError(f"{what} differs between ranks")


def broadcast_parameters(params, root=0, comm=None):
    """Copy root's tensors into every rank's tensors, in place.

    params: a mapping of names to tensors (``model.state_dict()``) or an iterable of (name,
    tensor) pairs (``model.named_parameters()``). Tensors of one dtype travel together in one
    broadcast. The names, dtypes and shapes must be the same on every rank (checked).
    """
    items = list(params.items()) if isinstance(params, Mapping) else list(params)
    for name, t in items:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"broadcast_parameters: {name!r} is a {type(t).__name__}, not a tensor")
    _agree(_fingerprint((n, t.dtype, t.shape) for n, t in items), comm,
           "broadcast_parameters: the list of tensors (names, dtypes, shapes)")
    by_dtype = {}
    for _, t in items:
        by_dtype.setdefault(t.dtype, []).append(t)
    with torch.no_grad():
        for tensors in by_dtype.values():
            flat = torch.cat([t.detach().reshape(-1) for t in tensors])
            mpiar.bcast(flat, root=root, comm=comm)
            offset = 0
            for t in tensors:
                n = t.numel()
                t.copy_(flat[offset:offset + n].view_as(t))
                offset += n


def broadcast_optimizer_state(optimizer, root=0, comm=None):
    """Make every rank's optimizer state and hyper-parameters root's.

    Root serialises ``optimizer.state_dict()`` (torch.save) and broadcasts the bytes; the other
    ranks load it, so ranks whose state is still empty (no step taken) receive root's buffers.
    """
    rank = (comm if comm is not None else mpiar._MPI.COMM_WORLD).Get_rank()
    size = np.zeros(1, dtype=np.int64)
    payload = None
    if rank == root:
        buf = io.BytesIO()
        torch.save(optimizer.state_dict(), buf)
        payload = np.frombuffer(buf.getbuffer(), dtype=np.uint8).copy()
        size[0] = payload.size
    mpiar.bcast(size, root=root, comm=comm)
    if rank != root:
        payload = np.empty(int(size[0]), dtype=np.uint8)
    mpiar.bcast(payload, root=root, comm=comm)
    if rank != root:
        state = torch.load(io.BytesIO(payload.tobytes()), map_location="cpu")
        optimizer.load_state_dict(state)


class _DistributedOptimizer:
    """Mixed into the wrapped optimizer's own class (see DistributedOptimizer).

    Overlap. Parameters are cut into buckets of about ``bucket_bytes``, in reverse order of the
    optimizer's parameters (the order in which a backward pass usually produces their
    gradients). A hook on each parameter's gradient accumulator marks the parameter ready when
    the backward pass has accumulated its gradient; when every parameter of a bucket is ready and
    every earlier bucket has started, the bucket starts: one ``KVStore.pushpull_async`` of its
    gradients, in place, with the priority ``-index`` (the first parameters highest), then the
    first test of its last request, which starts the store's queue. Each later hook tests the
    oldest started request, so the reductions advance while the backward pass computes.
    ``synchronize()`` (and so ``step()``) starts the buckets still waiting and waits for all.

    The rule that keeps the ranks in step: buckets start strictly in bucket order, one start
    point each, so the sequence of collective calls is the same on every rank whatever order
    the hooks fire in and whichever parameters receive a gradient. A parameter whose gradient the
    backward pass did not produce on this rank (unused in this step, or a gradient of None) is
    averaged in its bucket at ``step()``, with its current ``.grad`` or zeros when that is None,
    exactly as the blocking optimizer does; it only delays its bucket (and the later ones) to
    ``step()``.

    Rounds. Every averaging ends (with overlap) or begins (without) with a round: one small
    allreduce by which the ranks agree on the round's number, on whether it feeds a step or is
    discarded (``zero_grad()`` after a backward pass that raised), and on whether any rank's
    backward pass raised. A backward pass is seen to start when the first gradient hook fires,
    and to end when the callback it queues on the autograd engine runs, which the engine skips
    when the pass raises. A round fails on every rank, before any rank applies it, when the
    ranks disagree or when it feeds a step while a rank's backward pass raised, since the ranks
    would otherwise apply different (or partial) gradients. The ranks that discard raise
    nothing more there (their backward pass has raised already), so every rank has seen the
    step fail and the ranks stay in step.
    """

    def _mpiar_setup(self, named_parameters, comm, op, fusion_bytes, overlap, bucket_bytes,
                     backward_passes_per_step, verify):
        params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            names = {}
            for g, group in enumerate(self.param_groups):
                for i, p in enumerate(group["params"]):
                    names[id(p)] = f"param.{g}.{i}"
        else:
            names, used = {}, set()
            for name, p in named_parameters:
                if name in used:
                    raise ValueError(f"DistributedOptimizer: parameter name {name!r} appears twice")
                used.add(name)
                names[id(p)] = name
            missing = [p for p in params if id(p) not in names]
            if missing:
                raise ValueError(f"DistributedOptimizer: {len(missing)} parameters of the optimizer "
                                 "are not in named_parameters")
        if int(backward_passes_per_step) < 1:
            raise ValueError("DistributedOptimizer: backward_passes_per_step must be at least 1")
        seen = set()
        self._mpiar_params = []
        for p in params:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                self._mpiar_params.append((names[id(p)], p))
        self._mpiar_names = [name for name, _ in self._mpiar_params]
        self._mpiar_kv = mpiar.KVStore(comm, op=op, fusion_bytes=fusion_bytes, verify=verify)
        # The store registers every gradient's dtype and size once (its value is not used).
        self._mpiar_kv.init(self._mpiar_names,
                            [torch.zeros_like(p, memory_format=torch.contiguous_format)
                             for _, p in self._mpiar_params])
        self._mpiar_synchronized = False
        self._mpiar_overlap = bool(overlap)
        self._mpiar_passes = int(backward_passes_per_step)
        self._mpiar_comm = comm
        self._mpiar_rank = (comm if comm is not None else mpiar._MPI.COMM_WORLD).Get_rank()
        self._mpiar_rounds = 0
        self._mpiar_backward_open = False  # a backward pass fired a hook and has not ended
        if self._mpiar_overlap:
            self._mpiar_make_buckets(_BUCKET_BYTES if bucket_bytes is None else int(bucket_bytes))
            self._mpiar_reset()
        self._mpiar_register_hooks()

    # ---- overlap -------------------------------------------------------------------------

    def _mpiar_make_buckets(self, bucket_bytes):
        buckets, current, size = [], [], 0
        for i in reversed(range(len(self._mpiar_params))):
            p = self._mpiar_params[i][1]
            n = p.numel() * p.element_size()
            if current and size + n > bucket_bytes:
                buckets.append(current)
                current, size = [], 0
            current.append(i)
            size += n
        if current:
            buckets.append(current)
        self._mpiar_buckets = buckets
        self._mpiar_bucket_of = {i: b for b, bucket in enumerate(buckets) for i in bucket}

    def _mpiar_reset(self):
        """The state of a step before its backward pass."""
        self._mpiar_countdown = [self._mpiar_passes] * len(self._mpiar_params)
        self._mpiar_left = [len(bucket) for bucket in self._mpiar_buckets]
        self._mpiar_next = 0          # the next bucket to start
        self._mpiar_pending = collections.deque()  # started requests, oldest first
        self._mpiar_hooked = False    # whether a hook fired since the last reset
        self._mpiar_started_in_backward = 0

    def _mpiar_register_hooks(self):
        # A hook on the gradient accumulator runs after the backward pass has added the
        # parameter's gradient into .grad (torch 1.13 has no post-accumulate hook on tensors).
        # The accumulators are kept, or each backward pass would make new ones without hooks;
        # the hooks hold the optimizer weakly, so a dropped optimizer takes its hooks along.
        me = weakref.ref(self)
        self._mpiar_grad_accs = []
        with torch.enable_grad():
            for i, (_, p) in enumerate(self._mpiar_params):
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(_make_hook(me, i))
                self._mpiar_grad_accs.append(acc)

    def _mpiar_backward_ended(self):
        self._mpiar_backward_open = False

    def _mpiar_on_grad(self, i):
        if not self._mpiar_backward_open:
            # The engine runs this callback when the pass ends, and not when it raises; a pass
            # that raised leaves the flag set until the next round.
            self._mpiar_backward_open = True
            torch.autograd.Variable._execution_engine.queue_callback(
                _make_callback(weakref.ref(self)))
        if not self._mpiar_overlap:
            return
        left = self._mpiar_countdown[i]
        if left == 0:
            name = self._mpiar_names[i]
            raise RuntimeError(
                f"DistributedOptimizer: the gradient of {name!r} was computed again before "
                f"step() (more than backward_passes_per_step={self._mpiar_passes} backward "
                "passes); call step() or synchronize() in between, or raise "
                "backward_passes_per_step to accumulate gradients locally")
        self._mpiar_countdown[i] = left - 1
        self._mpiar_hooked = True
        if left > 1:
            return
        self._mpiar_left[self._mpiar_bucket_of[i]] -= 1
        while (self._mpiar_next < len(self._mpiar_buckets)
               and self._mpiar_left[self._mpiar_next] == 0):
            self._mpiar_start_bucket()
            self._mpiar_started_in_backward += 1
        # Advance the started reductions (a test of a started request is local).
        pending = self._mpiar_pending
        while pending and pending[0].test():
            pending.popleft()

    def _mpiar_grad(self, i):
        p = self._mpiar_params[i][1]
        if p.grad is None:
            p.grad = torch.zeros_like(p, memory_format=torch.contiguous_format)
        elif not p.grad.is_contiguous():
            p.grad = p.grad.contiguous()
        return p.grad

    def _mpiar_start_bucket(self):
        bucket = self._mpiar_buckets[self._mpiar_next]
        self._mpiar_next += 1
        reqs = self._mpiar_kv.pushpull_async([self._mpiar_names[i] for i in bucket],
                                             [self._mpiar_grad(i) for i in bucket],
                                             priority=[-i for i in bucket])
        # The first test of a queued request starts the store's queue: this bucket's start
        # point, at the same place in the sequence of calls on every rank.
        reqs[-1].test()
        self._mpiar_pending.extend(reqs)

    def _mpiar_finish(self):
        """Start the buckets still waiting, in order, and wait for every reduction."""
        try:
            while self._mpiar_next < len(self._mpiar_buckets):
                self._mpiar_start_bucket()
        finally:
            self._mpiar_kv.wait_all()
            self._mpiar_reset()

    # ---- rounds --------------------------------------------------------------------------

    def _mpiar_round(self, applies):
        """Agree with the other ranks on this round (see the class comment). A round that
        feeds a step raises MismatchError, on every rank that steps, when it must not be
        applied; a discarded one raises nothing (nothing is applied here, and this rank's
        backward pass has already raised)."""
        failed = self._mpiar_backward_open
        self._mpiar_backward_open = False
        self._mpiar_rounds += 1
        mine = [self._mpiar_rounds, int(applies), self._mpiar_rank + 1 if failed else 0]
        n = len(mine)
        v = np.array(mine + [-x for x in mine], dtype=np.int64)
        mpiar.allreduce(v, op="max", out=v, comm=self._mpiar_comm, check=False)
        high, low = v[:n], -v[n:]
        if not applies:
            return
        where = "DistributedOptimizer: the gradients were not applied on any rank"
        if high[0] != low[0]:
            raise mpiar.MismatchError(
                f"{where}: the ranks are at different averaging rounds ({low[0]} and {high[0]} "
                "among them)")
        if high[1] != low[1]:
            raise mpiar.MismatchError(
                f"{where}: some ranks step while others discard this step's gradients "
                "(zero_grad() after a backward pass that raised, without step()); the ranks "
                "must agree on skipping a step")
        if high[1] and high[2]:
            raise mpiar.MismatchError(
                f"{where}: the backward pass raised on rank {high[2] - 1} (and perhaps "
                "others), so its gradients are incomplete; skip the step on every rank")

    # ---- the optimizer's interface ----------------------------------------------------------

    def synchronize(self):
        """Average every gradient over the ranks now.

        ``step()`` calls it unless it was called since the last step, so gradients can be
        clipped between the two. A parameter without a gradient counts as a zero gradient. With
        overlap, it starts the buckets the backward pass has not started and waits for all.
        Raises MismatchError on every rank when the ranks' gradients of this step differ in
        kind (a rank's backward pass raised, or ranks are at different steps).
        """
        if self._mpiar_overlap:
            self._mpiar_finish()
            self._mpiar_round(applies=True)
        else:
            # The round comes first here, so that a failed one moves no data.
            self._mpiar_round(applies=True)
            grads = [self._mpiar_grad(i) for i in range(len(self._mpiar_params))]
            if grads:
                self._mpiar_kv.pushpull(self._mpiar_names, grads)
        self._mpiar_synchronized = True

    def zero_grad(self, *args, **kwargs):
        # Reductions started by hooks write into the gradients: finish them first (they are
        # collective, so they are completed rather than abandoned). After a backward pass that
        # raised, the discarded gradients still count as a round, so that the ranks that step
        # learn of it at the same point (and raise) while the ranks stay in step.
        hooked = self._mpiar_overlap and self._mpiar_hooked
        if hooked or self._mpiar_backward_open:
            try:
                if hooked:
                    self._mpiar_finish()
                self._mpiar_round(applies=False)
            finally:
                super().zero_grad(*args, **kwargs)
            return None
        return super().zero_grad(*args, **kwargs)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if not self._mpiar_synchronized or (self._mpiar_overlap and self._mpiar_hooked):
            self.synchronize()
        self._mpiar_synchronized = False
        super().step()
        return loss


def _make_callback(optimizer_ref):
    def callback():
        opt = optimizer_ref()
        if opt is not None:
            opt._mpiar_backward_ended()
    return callback


def _make_hook(optimizer_ref, i):
    def hook(*_):
        opt = optimizer_ref()
        if opt is not None:
            opt._mpiar_on_grad(i)
    return hook


#: Default bucket size of the overlapping DistributedOptimizer.
_BUCKET_BYTES = 1 << 20


def DistributedOptimizer(optimizer, named_parameters=None, comm=None, op="avg", fusion_bytes=None,
                         overlap=True, bucket_bytes=None, backward_passes_per_step=1,
                         verify=True):
    """Wrap a torch optimizer so that ``step()`` first averages the gradients over the ranks.

    The result is an instance of a subclass of the optimizer's own class sharing its state, so
    it still is a ``torch.optim.Optimizer`` of that kind (learning-rate schedulers and
    ``state_dict()`` work unchanged). ``named_parameters`` (e.g. ``model.named_parameters()``)
    names the gradients in the store; without it they are named by position. Every rank must
    wrap the same parameters in the same order (checked by the store). Collective.

    ``overlap=True``: hooks start the averaging of buckets of about ``bucket_bytes`` (default
    1 MiB) during the backward pass, and ``step()`` waits; ``overlap=False``: ``step()`` averages
    everything in one fused pushpull. Both give the same bits. ``fusion_bytes`` is the store's
    fusion threshold. ``backward_passes_per_step``: how many backward passes accumulate
    gradients locally before the averaging starts. ``verify``: the store's agreement on the keys
    at every start (one small allreduce each).
    """
    base = type(optimizer)
    cls = type(base.__name__, (_DistributedOptimizer, base), {"__module__": __name__})
    dist = cls.__new__(cls)
    dist.__dict__.update(optimizer.__dict__)
    dist._mpiar_setup(named_parameters, comm, op, fusion_bytes, overlap, bucket_bytes,
                      backward_passes_per_step, verify)
    return dist
