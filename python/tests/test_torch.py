"""torch.Tensor support (every dtype incl. float16 and bfloat16, views, in place) and
mpiar.torch: broadcast_parameters, broadcast_optimizer_state, DistributedOptimizer."""

import numpy as np
import pytest
import torch

import mpiar
import mpiar.torch

torch.set_num_threads(1)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.int64, torch.bool]
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
OPS = ["sum", "prod", "min", "max", "avg", "band", "bor", "bxor", "land", "lor", "lxor"]


def supported(dtype, op):
    if dtype is torch.bool:
        return op in ("land", "lor", "lxor", "band", "bor", "bxor", "min", "max")
    if op in ("land", "lor", "lxor"):
        return False
    if dtype in FLOATS:
        return op not in ("band", "bor", "bxor")
    return op != "avg"


def data(dtype, op, r, n=29):
    """Small integers (exact in every format, also bfloat16's 8 bits) or full-range integers."""
    g = torch.Generator().manual_seed(1000 * r + 10 * DTYPES.index(dtype) + OPS.index(op))
    if dtype is torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype in FLOATS:
        lo, hi = (-3, 4) if op == "prod" else (-16, 17)
        v = torch.randint(lo, hi, (n,), generator=g).double()
        v[v == 0] = 1
        return (v if op == "prod" else v / 2).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dtype)


def reference(dtype, op, size):
    xs = [data(dtype, op, r) for r in range(size)]
    if dtype in FLOATS:
        acc = xs[0].double()
        for x in xs[1:]:
            x = x.double()
            acc = {"sum": acc + x, "avg": acc + x, "prod": acc * x, "min": torch.minimum(acc, x),
                   "max": torch.maximum(acc, x)}[op]
        return (acc / size if op == "avg" else acc).to(dtype)
    # Integers and bools through NumPy, whose fixed-width arithmetic wraps like mpiar's.
    arrs = np.stack([x.numpy() for x in xs])
    uf = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
          "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor,
          "land": np.logical_and, "lor": np.logical_or, "lxor": np.logical_xor}[op]
    return torch.from_numpy(uf.reduce(arrs, axis=0, dtype=arrs.dtype).astype(arrs.dtype))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_and_op(dtype, op, rank, size):
    x = data(dtype, op, rank)
    if not supported(dtype, op):
        with pytest.raises(mpiar.BadDtypeOpError):
            mpiar.allreduce(x, op=op)
        return
    y = mpiar.allreduce(x, op=op)
    assert isinstance(y, torch.Tensor) and y.dtype == dtype and y.shape == x.shape
    assert torch.equal(y, reference(dtype, op, size))
    assert mpiar.allreduce(x, op=op, out=x) is x
    assert torch.equal(x, y)


def test_views_and_layouts(rank, size):
    base = torch.arange(48, dtype=torch.float32).reshape(6, 8) * (rank + 1)
    total = torch.arange(48, dtype=torch.float32).reshape(6, 8) * (size * (size + 1) // 2)
    for view, ref in [(base.t(), total.t()), (base[:, ::2], total[:, ::2]), (base[2:4], total[2:4])]:
        y = mpiar.allreduce(view)
        assert y.is_contiguous() and torch.equal(y, ref)
    row2 = base[2].clone()
    row = base[3]  # a contiguous view into the middle of the storage, reduced in place
    mpiar.allreduce(row, out=row)
    assert torch.equal(base[3], total[3]) and torch.equal(base[2], row2)
    cl = torch.ones(2, 3, 4, 5).to(memory_format=torch.channels_last) * (rank + 1)
    assert torch.equal(mpiar.allreduce(cl), torch.full((2, 3, 4, 5), size * (size + 1) / 2))
    with pytest.raises(ValueError, match="not contiguous"):
        t = torch.ones(4, 4)
        mpiar.allreduce(t, out=torch.empty(4, 8)[:, ::2])


def test_zero_size_and_scalars(rank, size):
    assert mpiar.allreduce(torch.empty(0)).shape == (0,)
    assert mpiar.allreduce(torch.empty(3, 0, dtype=torch.int64)).shape == (3, 0)
    s = torch.tensor(float(rank))
    assert mpiar.allreduce(s).item() == size * (size - 1) / 2


def test_parameters_and_grad_tensors(rank, size):
    p = torch.nn.Parameter(torch.full((3,), float(rank)))
    with torch.no_grad():
        mpiar.allreduce(p, out=p, op="max")
    assert torch.equal(p.detach(), torch.full((3,), float(size - 1))) and p.requires_grad
    y = mpiar.allreduce(p)
    assert not y.requires_grad


def _started(request):
    request.start()
    return request


def test_in_place_writes_and_autograd(rank, size):
    """mpiar writes tensors in place as torch's in-place operations do, and keeps their rules."""
    # A leaf that requires grad, under grad mode: every call that would write it refuses.
    w = torch.full((3,), float(rank + 1), requires_grad=True)
    y = (w * w).sum()
    writes = [lambda: mpiar.allreduce(w, out=w), lambda: mpiar.allreduce(torch.ones(3), out=w),
              lambda: mpiar.bcast(w), lambda: mpiar.iallreduce(w, out=w),
              lambda: mpiar.ibcast(w), lambda: mpiar.allreduce_init(w, out=w),
              lambda: mpiar.bcast_init(w)]
    for write in writes:
        with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
            write()
    assert w._version == 0
    y.backward()
    assert torch.equal(w.grad, torch.full((3,), 2.0 * (rank + 1)))  # not the reduced values'
    # Under no_grad the write is allowed and bumps the version, so a backward pass that saved
    # the tensor refuses to run instead of using the new values.
    y = (w * w).sum()
    with torch.no_grad():
        mpiar.allreduce(w, out=w)
    assert w._version == 1 and w.requires_grad
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    # A tensor that does not require grad but that backward saved: every kind of write counts.
    x = torch.ones(3, requires_grad=True)
    a = torch.full((3,), float(rank))
    out = torch.empty(3)
    kv = mpiar.KVStore()
    kv.init("a", torch.zeros(3))
    p = mpiar.allreduce_init(a, out=out)
    b = torch.zeros(3)
    writes = [lambda: mpiar.allreduce(a, out=a), lambda: mpiar.allreduce(x.detach(), out=a),
              lambda: mpiar.bcast(a), lambda: mpiar.iallreduce(a, out=a).wait(),
              lambda: _started(mpiar.bcast_init(a)), lambda: kv.pushpull("a", a),
              lambda: kv.pushpull("a", b, out=a), lambda: kv.pushpull_async("a", a).wait(),
              lambda: kv.broadcast("a", a), lambda: kv.value("a", out=a)]
    for write in writes:
        z = (a * x).sum()
        version = a._version
        req = write()
        if isinstance(req, mpiar.Request):
            req.wait()
            req.free()
        assert a._version > version, write
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.backward()
    # A persistent request writes at each start, not when it is made.
    z = (out * x).sum()
    version = out._version
    for _ in range(2):
        p.start()
        p.wait()
    assert out._version == version + 2
    p.free()
    kv.close()
    # Results made by the call itself, and reads, leave the inputs' versions alone.
    version = a._version
    r = mpiar.allreduce(a)
    assert a._version == version and r._version == 0 and not r.requires_grad
    assert torch.equal(mpiar.allreduce(x.detach()), torch.full((3,), float(size)))


def test_mixed_with_numpy(rank, size):
    x = torch.full((4,), rank, dtype=torch.int32)
    out = np.empty(4, np.int32)
    assert mpiar.allreduce(x, out=out) is out and out.tolist() == [size * (size - 1) // 2] * 4
    t = torch.empty(4, dtype=torch.int32)
    mpiar.allreduce(np.full(4, 1, np.int32), out=t)
    assert t.tolist() == [size] * 4
    with pytest.raises(TypeError, match="dtype"):
        mpiar.allreduce(torch.ones(4, dtype=torch.bfloat16), out=np.empty(4, np.float16))


def test_bad_tensors():
    with pytest.raises(TypeError, match="does not reduce"):
        mpiar.allreduce(torch.ones(3, dtype=torch.int16))
    with pytest.raises(TypeError, match="does not reduce"):
        mpiar.allreduce(torch.ones(3, dtype=torch.complex64))
    with pytest.raises(TypeError, match="strided"):
        mpiar.allreduce(torch.eye(3).to_sparse())
    with pytest.raises(TypeError, match="device 'meta'"):
        mpiar.allreduce(torch.ones(3, device="meta"))


def test_bcast_tensors(rank, size):
    for dtype in (torch.bfloat16, torch.float16, torch.int64, torch.bool):
        x = torch.full((7,), rank % 2, dtype=dtype)
        assert mpiar.bcast(x, root=size - 1) is x
        assert torch.equal(x, torch.full((7,), (size - 1) % 2, dtype=dtype))


def test_kvstore_with_tensors(rank, size):
    with mpiar.KVStore() as kv:
        w = torch.full((2, 3), float(rank), dtype=torch.bfloat16)
        kv.init("w", w)
        assert torch.equal(w, torch.zeros(2, 3, dtype=torch.bfloat16))
        v = kv.value("w")
        assert isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 and v.shape == (2, 3)
        g = [torch.full((2, 3), float(rank), dtype=torch.bfloat16)]
        assert kv.pushpull(["w"], g) is g
        assert torch.equal(g[0].float(), torch.full((2, 3), (size - 1) / 2))


# ---- mpiar.torch ---------------------------------------------------------------------------

def model(seed, mixed=False):
    """A small model; `mixed` makes its last layer float64 (for the broadcasts, not for use)."""
    torch.manual_seed(seed)
    last = torch.nn.Linear(8, 2)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                               last.to(torch.float64) if mixed else last)


def test_broadcast_parameters(rank, size):
    m = model(seed=rank, mixed=True)
    root = size - 1
    expected = model(seed=root, mixed=True).state_dict()
    with torch.no_grad():
        m[1].num_batches_tracked.fill_(rank)
    expected["1.num_batches_tracked"].fill_(root)
    mpiar.torch.broadcast_parameters(m.state_dict(), root=root)
    for name, t in m.state_dict().items():
        assert torch.equal(t, expected[name]), name
    m2 = model(seed=rank + 10)
    mpiar.torch.broadcast_parameters(m2.named_parameters())
    for a, b in zip(m2.parameters(), model(seed=10).parameters()):
        assert torch.equal(a.detach(), b.detach())


def test_broadcast_parameters_mismatch(rank, size):
    if size < 2:
        pytest.skip("needs 2 ranks")
    m = torch.nn.Linear(4, 3 if rank == 1 else 2)
    with pytest.raises(mpiar.MismatchError, match="names, dtypes, shapes"):
        mpiar.torch.broadcast_parameters(m.state_dict())


def test_broadcast_optimizer_state(rank, size):
    m = model(seed=0)
    opt = torch.optim.SGD(m.parameters(), lr=0.1 * (rank + 1), momentum=0.9)
    if rank == 0:
        m(torch.ones(3, 4)).sum().backward()
        opt.step()
    mpiar.torch.broadcast_optimizer_state(opt, root=0)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)
    bufs = [opt.state[p]["momentum_buffer"] for p in m.parameters()]
    assert all(isinstance(b, torch.Tensor) for b in bufs)
    bits = torch.cat([b.reshape(-1).double() for b in bufs])
    assert torch.equal(mpiar.allreduce(bits, op="max"), bits)
    assert torch.equal(mpiar.allreduce(bits, op="min"), bits)


def test_distributed_optimizer_averages(rank, size):
    m = torch.nn.Linear(3, 2)
    with torch.no_grad():
        for p in m.parameters():
            p.fill_(1.0)
    base = torch.optim.SGD(m.parameters(), lr=0.5)
    opt = mpiar.torch.DistributedOptimizer(base, m.named_parameters())
    assert isinstance(opt, torch.optim.SGD)
    for p in m.parameters():
        p.grad = torch.full_like(p, float(rank))
    opt.step()
    mean = (size - 1) / 2
    for p in m.parameters():
        assert torch.allclose(p.detach(), torch.full_like(p, 1.0 - 0.5 * mean))
    # synchronize() first, then clip, then step(): the gradients are averaged once.
    for p in m.parameters():
        p.grad = torch.full_like(p, 2.0 * (rank + 1))
    opt.synchronize()
    torch.nn.utils.clip_grad_value_(m.parameters(), 100.0)
    before = [p.detach().clone() for p in m.parameters()]
    opt.step()
    for p, b in zip(m.parameters(), before):
        assert torch.allclose(p.detach(), b - 0.5 * (size + 1))
    assert "state" in opt.state_dict()
    # A parameter without a gradient counts as a zero gradient; a closure's loss comes back.
    opt.zero_grad(set_to_none=True)
    loss = opt.step(lambda: torch.tensor(3.0))
    assert loss.item() == 3.0


def test_distributed_optimizer_with_scheduler(rank, size):
    torch.manual_seed(0)  # the same initial weights on every rank
    m = torch.nn.Linear(2, 1)
    opt = mpiar.torch.DistributedOptimizer(torch.optim.Adam(m.parameters(), lr=0.1))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    m(torch.ones(1, 2) * rank).sum().backward()
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05)
    bits = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
    assert torch.equal(mpiar.allreduce(bits, op="max"), bits)


# ---- the hook-driven (overlapping) DistributedOptimizer -------------------------------------

class _Probe(torch.autograd.Function):
    """Identity on the model's input; its backward runs last and calls `seen`."""

    @staticmethod
    def forward(ctx, x, seen):
        ctx.seen = seen
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        ctx.seen()
        return g, None


class Net(torch.nn.Module):
    """An MLP; rank `skip` leaves its middle layer out (no gradient there on that rank)."""

    def __init__(self, skip=None):
        super().__init__()
        torch.manual_seed(3)
        self.l1 = torch.nn.Linear(6, 32)
        self.l2 = torch.nn.Linear(32, 32)
        self.l3 = torch.nn.Linear(32, 2)
        self.skip = skip

    def forward(self, x, rank, seen=None):
        if seen is not None:
            x = _Probe.apply(x.requires_grad_(), seen)
        h = torch.tanh(self.l1(x))
        if rank != self.skip:
            h = torch.tanh(self.l2(h))
        return self.l3(h)


def pair(skip=None, passes=1):
    """The same model twice: one with the blocking optimizer, one with the hook-driven one
    (buckets of 512 bytes: [l3.bias, l3.weight, l2.bias], [l2.weight], [l1.bias], [l1.weight])."""
    mb, mo = Net(skip), Net(skip)
    ob = mpiar.torch.DistributedOptimizer(torch.optim.SGD(mb.parameters(), lr=0.1, momentum=0.9),
                                          mb.named_parameters(), overlap=False)
    oo = mpiar.torch.DistributedOptimizer(torch.optim.SGD(mo.parameters(), lr=0.1, momentum=0.9),
                                          mo.named_parameters(), bucket_bytes=512,
                                          backward_passes_per_step=passes)
    assert len(oo._mpiar_buckets) == 4
    return (mb, ob), (mo, oo)


def same_bits(ma, mb):
    return all(torch.equal(a, b) for a, b in zip(ma.parameters(), mb.parameters()))


def identical_on_every_rank(m):
    bits = torch.cat([p.detach().reshape(-1) for p in m.parameters()]).view(torch.int32)
    return torch.equal(mpiar.allreduce(bits, op="max"), bits) and torch.equal(
        mpiar.allreduce(bits, op="min"), bits)


@pytest.mark.parametrize("skip", [None, 1], ids=["all-used", "rank1-skips-l2"])
def test_overlap_equals_blocking_bit_for_bit(rank, size, skip):
    """Same bits as the blocking optimizer, also when a rank produces no gradient for some
    parameters (their buckets then start at step(), still in bucket order)."""
    (mb, ob), (mo, oo) = pair(skip)
    g = torch.Generator().manual_seed(rank)
    for _ in range(4):
        x, y = torch.randn(5, 6, generator=g), torch.randn(5, 2, generator=g)
        for m, o in ((mb, ob), (mo, oo)):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x, rank), y).backward()
            o.step()
        assert same_bits(mb, mo)
    assert identical_on_every_rank(mo)
    if skip is not None and size > 1:
        assert not torch.equal(Net(skip).l2.weight, mo.l2.weight)  # rank 0's gradients reached l2


def test_overlap_starts_during_backward(rank, size):
    """The reductions of the last layers start while the backward pass still runs: when it
    reaches the model's input (last), the buckets of l3 and l2 have started."""
    _, (mo, oo) = pair()
    at_input = []
    x, y = torch.randn(5, 6), torch.randn(5, 2)
    oo.zero_grad()
    loss = torch.nn.functional.mse_loss(
        mo(x, rank, seen=lambda: at_input.append(oo._mpiar_started_in_backward)), y)
    loss.backward()
    assert at_input[0] >= 2
    assert oo._mpiar_started_in_backward == 4  # l1's buckets too, started by its hooks
    oo.step()
    assert all(r.done for r in oo._mpiar_pending) and not oo._mpiar_pending


def test_overlap_accumulation_and_misuse(rank, size):
    (mb, ob), (mo, oo) = pair(passes=2)
    g = torch.Generator().manual_seed(rank)
    for _ in range(2):
        batches = [(torch.randn(5, 6, generator=g), torch.randn(5, 2, generator=g))
                   for _ in range(2)]
        for m, o in ((mb, ob), (mo, oo)):
            o.zero_grad()
            for x, y in batches:  # two backward passes accumulate locally, one averaging
                torch.nn.functional.mse_loss(m(x, rank), y).backward()
            if o is oo:
                assert oo._mpiar_started_in_backward == 4
            o.step()
        assert same_bits(mb, mo)
    # A third backward pass before step(): a clear error, and synchronize() still completes.
    x, y = torch.randn(5, 6, generator=g), torch.randn(5, 2, generator=g)
    for _ in range(2):
        torch.nn.functional.mse_loss(mo(x, rank), y).backward()
    with pytest.raises(RuntimeError, match="computed again before step"):
        torch.nn.functional.mse_loss(mo(x, rank), y).backward()
    # That pass added into some gradients before it raised: the averaging completes, and then
    # refuses, on every rank, to let them be applied.
    with pytest.raises(mpiar.MismatchError, match="backward pass raised on rank"):
        oo.synchronize()
    assert not oo._mpiar_pending
    # zero_grad() after a backward pass finishes the reductions it started, then clears.
    oo.step()
    for _ in range(2):
        torch.nn.functional.mse_loss(mo(x, rank), y).backward()
    oo.zero_grad()
    assert all(p.grad is None or not p.grad.any() for p in mo.parameters())
    assert not oo._mpiar_pending
    # A dropped optimizer takes its hooks along.
    del oo
    torch.nn.functional.mse_loss(mo(x, rank), y).backward()


def _fail_once(step):
    """A user's gradient hook that raises in the given step (counted from 1), else passes."""
    calls = []

    def hook(grad):
        calls.append(1)
        if len(calls) == step:
            raise RuntimeError("the user's gradient hook failed")
        return grad
    return hook


def _train_skipping_failures(m, o, rank, steps, after_failure):
    """Steps of a loop that catches a failed backward pass and then either skips the step
    ("skip") or steps anyway ("step"). @return the errors the optimizer raised, by step."""
    g = torch.Generator().manual_seed(7)
    errors = {}
    for s in range(1, steps + 1):
        x, y = torch.randn(5, 6, generator=g), torch.randn(5, 2, generator=g)
        try:
            o.zero_grad()
            try:
                torch.nn.functional.mse_loss(m(x, rank), y).backward()
            except RuntimeError as e:
                assert "the user's gradient hook failed" in str(e)
                if after_failure == "skip":
                    continue
            o.step()
        except mpiar.MismatchError as e:
            errors[s] = str(e)
    return errors


@pytest.mark.parametrize("after_failure", ["skip", "step"])
@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "blocking"])
def test_failed_backward_on_one_rank_fails_every_rank(rank, size, overlap, after_failure):
    """Rank 0's own gradient hook raises in step 1 (after the optimizer's hooks of the later
    layers have fired). Whether rank 0 then skips that step or steps with what it has, the
    ranks would apply different gradients: the step fails on every rank (rank 0's backward
    pass, and the step of every rank that steps), no rank applies it, and the next steps run
    normally with identical parameters everywhere."""
    m = Net()
    o = mpiar.torch.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1),
                                         m.named_parameters(), overlap=overlap, bucket_bytes=512)
    if rank == 0:
        m.l1.weight.register_hook(_fail_once(1))
    errors = _train_skipping_failures(m, o, rank, 3, after_failure)
    steps_in_1 = after_failure == "step" or rank != 0
    if steps_in_1 and (size > 1 or after_failure == "step"):
        assert list(errors) == [1], errors
        assert "rank 0" in errors[1] or "discard" in errors[1], errors
    else:
        assert not errors, errors
    assert identical_on_every_rank(m)
    # The ranks stay in step: one more step, without error.
    assert not _train_skipping_failures(m, o, rank, 1, after_failure)
    assert identical_on_every_rank(m)


def test_node_shared_tensors(rank, size):
    """mpiar.alloc(..., like="torch") and torch views of node-shared arrays (test_alloc.py has
    the rest of mpiar.alloc; here because this file already imports torch)."""
    t = mpiar.alloc((5, 7), "float32", like="torch")
    assert isinstance(t, torch.Tensor) and t.shape == (5, 7) and t.dtype == torch.float32
    t.copy_(torch.from_numpy(np.sin(np.arange(35, dtype=np.float32) * 0.37 + rank).reshape(5, 7)))
    ref = mpiar.allreduce(t.clone())
    mpiar.allreduce(t, out=t)
    assert torch.allclose(t, ref, rtol=1e-5, atol=1e-6)
    b = mpiar.alloc(33, torch.bfloat16, like="torch")
    b.fill_(rank + 1)
    mpiar.allreduce(b, out=b)
    assert b.dtype == torch.bfloat16 and b.float().sum().item() == 33 * sum(
        r + 1 for r in range(size))
    n = mpiar.alloc(6, "float64")
    v = torch.from_numpy(n)                       # a tensor over a NumPy allocation
    v.fill_(rank)
    mpiar.allreduce(v, out=v)
    assert n.tolist() == [sum(range(size))] * 6
    mpiar.free(t)
    mpiar.free(b)
    mpiar.free(n)
