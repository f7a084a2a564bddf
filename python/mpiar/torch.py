"""Data-parallel PyTorch training with mpiar.

- ``broadcast_parameters(params, root=0, comm=None)``: make every rank's tensors root's, in place
  (a ``state_dict()`` or ``named_parameters()``).
- ``broadcast_optimizer_state(optimizer, root=0, comm=None)``: make every rank's optimizer state
  (momentum buffers, step counts, hyper-parameters) root's.
- ``DistributedOptimizer(optimizer, named_parameters=None, comm=None, op="avg",
  fusion_bytes=None)``: the optimizer, whose ``step()`` first averages every parameter's gradient
  over the ranks with one fused ``KVStore.pushpull`` of all of them.

Every function is collective over ``comm`` (``MPI.COMM_WORLD`` by default): every rank calls it,
with the same parameters in the same order.
"""

import io
from collections.abc import Mapping

import numpy as np
import torch

import mpiar

__all__ = ["broadcast_parameters", "broadcast_optimizer_state", "DistributedOptimizer"]


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
    """Mixed into the wrapped optimizer's own class (see DistributedOptimizer)."""

    def _mpiar_setup(self, named_parameters, comm, op, fusion_bytes):
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
        seen = set()
        self._mpiar_params = []
        for p in params:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                self._mpiar_params.append((names[id(p)], p))
        self._mpiar_names = [name for name, _ in self._mpiar_params]
        self._mpiar_kv = mpiar.KVStore(comm, op=op, fusion_bytes=fusion_bytes)
        # The store registers every gradient's dtype and size once (its value is not used).
        self._mpiar_kv.init(self._mpiar_names,
                            [torch.zeros_like(p, memory_format=torch.contiguous_format)
                             for _, p in self._mpiar_params])
        self._mpiar_synchronized = False

    def synchronize(self):
        """Average every gradient over the ranks now (one fused pushpull of all of them).

        ``step()`` calls it unless it was called since the last step, so gradients can be
        clipped between the two. A parameter without a gradient counts as a zero gradient.
        """
        grads = []
        for _, p in self._mpiar_params:
            if p.grad is None:
                p.grad = torch.zeros_like(p, memory_format=torch.contiguous_format)
            elif not p.grad.is_contiguous():
                p.grad = p.grad.contiguous()
            grads.append(p.grad)
        if grads:
            self._mpiar_kv.pushpull(self._mpiar_names, grads)
        self._mpiar_synchronized = True

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if not self._mpiar_synchronized:
            self.synchronize()
        self._mpiar_synchronized = False
        super().step()
        return loss


def DistributedOptimizer(optimizer, named_parameters=None, comm=None, op="avg", fusion_bytes=None):
    """Wrap a torch optimizer so that ``step()`` first averages the gradients over the ranks.

    The result is an instance of a subclass of the optimizer's own class sharing its state, so
    it still is a ``torch.optim.Optimizer`` of that kind (learning-rate schedulers and
    ``state_dict()`` work unchanged). ``named_parameters`` (e.g. ``model.named_parameters()``)
    names the gradients in the store; without it they are named by position. Every rank must
    wrap the same parameters in the same order (checked by the store). Collective.
    """
    base = type(optimizer)
    cls = type(base.__name__, (_DistributedOptimizer, base), {"__module__": __name__})
    dist = cls.__new__(cls)
    dist.__dict__.update(optimizer.__dict__)
    dist._mpiar_setup(named_parameters, comm, op, fusion_bytes)
    return dist
