"""mpiar.schedule: write allreduce schedules in Python, as schedule files mpiar runs.

Pure Python (the standard library only; nothing here calls MPI). A schedule is the steps of
every rank of one allreduce on ``nranks`` ranks, over the vector cut into ``chunks`` equal chunks
(docs/schedules.md has the file format)::

    from mpiar.schedule import Schedule

    def ring(p):
        s = Schedule(p, chunks=p, name="ring")
        for k in range(p - 1):                            # reduce-scatter
            for r in range(p):
                c, nxt = (r - k) % p, (r + 1) % p
                src = s.input(r, c) if k == 0 else s.output(r, c)
                s.transfer_reduce(src, s.output(nxt, c), local=s.input(nxt, c))
        for k in range(p - 1):                            # allgather
            for r in range(p):
                c = (r + 1 - k) % p
                s.transfer(s.output(r, c), s.output((r + 1) % p, c))
        return s

    s = ring(4)
    s.check()            # symbolic: every output chunk holds every rank's contribution once
    s.verify()           # the simulator's checks, through mpiar-sim --schedule
    s.save("ring4.sched")

then ``MPIAR_ALGORITHM=file:ring4.sched``, ``options.algorithm = "file:ring4.sched"``,
``mpiar.allreduce(x, algorithm="file:ring4.sched")`` or ``mpiar-bench -a file:ring4.sched``.

Places are ``Ref`` objects: ``s.input(rank, chunk, n=1)``, ``s.output(...)``, ``s.scratch(...)``
(n chunks from ``chunk``). Steps:

- ``send(src, to)`` and ``recv(dst, frm)``: one message; a rank's sends to a peer and the peer's
  receives from it pair up in the order they are written (the tags are given here).
- ``recv_reduce(dst, frm, local=None)``: receive into a scratch place, then
  ``dst = local op received`` (``local`` defaults to ``dst``).
- ``copy(dst, src)``, ``reduce(dst, a, b)``: local steps.
- ``transfer(src, dst)`` = ``send(src, dst.rank)`` + ``recv(dst, src.rank)``, and
  ``transfer_reduce(src, dst, local=None)`` = ``send`` + ``recv_reduce``.

Dependencies come from the chunks the steps use: a step waits for the last step of its rank that
wrote what it reads or writes, and for the steps that read what it writes since then. Each
place carries the set of ranks whose contribution it holds, so a reduction of two places that
share a rank is refused at once, its operands are put in the order mpiar's builders use (the
lower rank's contribution first, so that every rank computes the same bits) and a reduction that
completes a chunk is marked final (where ``avg`` divides).
"""

import os
import shutil
import subprocess
import tempfile

__all__ = ["Schedule", "Ref", "ScheduleError", "VERSION", "TAG_LIMIT"]

VERSION = 1
TAG_LIMIT = 1024
_BUFS = ("i", "o", "s")


class ScheduleError(ValueError):
    """A step that cannot be part of a correct schedule, or a failed check."""


class Ref:
    """n chunks of one rank's buffer ('i' input, 'o' output, 's' scratch) from chunk `chunk`."""

    __slots__ = ("rank", "buf", "chunk", "n")

    def __init__(self, rank, buf, chunk, n=1):
        self.rank, self.buf, self.chunk, self.n = rank, buf, chunk, n

    def __repr__(self):
        return "%s%d[%d:%d]@%d" % (self.buf, self.chunk, self.chunk, self.chunk + self.n, self.rank)

    def _text(self):
        return "%s%d" % (self.buf, self.chunk)


class Schedule:
    """The steps of every rank of one allreduce on `nranks` ranks over `chunks` chunks.

    scratch: scratch chunks each rank may use (grown by recv_reduce when it allocates its own);
    inplace: "no" (out-of-place calls), "yes" (both) or "only" (in-place calls);
    order: "none", or "canonical" when every element is reduced in mpiar's canonical order
    (reproducible mode then runs the file as it is).
    """

    def __init__(self, nranks, chunks, scratch=0, name=None, inplace="no", order="none"):
        if not isinstance(nranks, int) or not 1 <= nranks <= 4096:
            raise ScheduleError("nranks must be an integer in 1..4096, not %r" % (nranks,))
        if not isinstance(chunks, int) or not 1 <= chunks <= 1 << 20:
            raise ScheduleError("chunks must be an integer in 1..%d, not %r" % (1 << 20, chunks))
        if inplace not in ("no", "yes", "only"):
            raise ScheduleError("inplace must be 'no', 'yes' or 'only', not %r" % (inplace,))
        if order not in ("none", "canonical"):
            raise ScheduleError("order must be 'none' or 'canonical', not %r" % (order,))
        if name is not None and (not name or len(name) > 71 or not all(
                c.isascii() and (c.isalnum() or c in "_-.") for c in name)):
            raise ScheduleError("name: letters, digits, '_', '-' and '.', at most 71, not %r" %
                                (name,))
        self.nranks, self.chunks, self.scratch_chunks = nranks, chunks, scratch
        self.name, self.inplace, self.order = name, inplace, order
        self.steps = [[] for _ in range(nranks)]  # per rank: [kind, fields, final, deps]
        # Per rank and (buffer, chunk): the last writer and the readers since (dependencies).
        self._writer = [dict() for _ in range(nranks)]
        self._readers = [dict() for _ in range(nranks)]
        # Per rank and (buffer, chunk): (the chunk of the vector it holds, frozenset of ranks).
        self._data = [dict() for _ in range(nranks)]
        for r in range(nranks):
            for c in range(chunks):
                self._data[r][("i", c)] = (c, frozenset([r]))
        self._sent = {}  # (src, dst) -> messages in flight: [(tag, n, data)]
        self._tags = {}  # (src, dst) -> next tag
        self._last_tag = {}  # (rank, kind, peer, tag) -> step index, to keep posting order
        self._tmp = [dict() for _ in range(nranks)]  # n -> [scratch chunks], next slot
        self._reserved, self._auto = scratch, [0] * nranks

    # ---- places ----
    def input(self, rank, chunk, n=1):
        return self._ref(rank, "i", chunk, n)

    def output(self, rank, chunk, n=1):
        return self._ref(rank, "o", chunk, n)

    def scratch(self, rank, chunk, n=1):
        if chunk + n > self.scratch_chunks:
            self.scratch_chunks = chunk + n
        return self._ref(rank, "s", chunk, n)

    def _ref(self, rank, buf, chunk, n):
        if not 0 <= rank < self.nranks:
            raise ScheduleError("rank %r is not in 0..%d" % (rank, self.nranks - 1))
        limit = self.chunks if buf != "s" else max(self.scratch_chunks, chunk + n)
        if n < 1 or chunk < 0 or chunk + n > limit:
            raise ScheduleError("chunks %d..%d are outside the %d chunks" % (chunk, chunk + n,
                                                                             limit))
        return Ref(rank, buf, chunk, n)

    # ---- dependencies and contents ----
    def _mem(self, ref):
        # In-place capable schedules: the input and the output are one memory.
        buf = "o" if ref.buf == "i" and self.inplace != "no" else ref.buf
        return [(buf, ref.chunk + j) for j in range(ref.n)]

    def _add(self, rank, kind, fields, reads, writes, final=False, extra=()):
        deps = set(extra)
        for ref in reads:
            for m in self._mem(ref):
                if m in self._writer[rank]:
                    deps.add(self._writer[rank][m])
        for ref in writes:
            for m in self._mem(ref):
                if m in self._writer[rank]:
                    deps.add(self._writer[rank][m])
                deps.update(self._readers[rank].get(m, ()))
        index = len(self.steps[rank])
        self.steps[rank].append((kind, fields, final, sorted(deps)))
        for ref in reads:
            for m in self._mem(ref):
                self._readers[rank].setdefault(m, set()).add(index)
        for ref in writes:
            for m in self._mem(ref):
                self._writer[rank][m] = index
                self._readers[rank][m] = set()
        return index

    def _get(self, ref):
        out = []
        for j in range(ref.n):
            d = self._data[ref.rank].get((ref.buf, ref.chunk + j))
            if d is None and ref.buf == "o" and self.inplace == "only":
                d = self._data[ref.rank].get(("i", ref.chunk + j))
            if d is None:
                raise ScheduleError("rank %d reads %s%d, which holds nothing yet" %
                                    (ref.rank, ref.buf, ref.chunk + j))
            out.append(d)
        return out

    def _put(self, ref, data):
        for j, d in enumerate(data):
            self._data[ref.rank][(ref.buf, ref.chunk + j)] = d
            if ref.buf == "o" and self.inplace == "only":
                self._data[ref.rank][("i", ref.chunk + j)] = d

    @staticmethod
    def _check_place(ref, writes):
        if writes and ref.buf == "i":
            raise ScheduleError("%r: a step may not write the input (write the output)" % (ref,))

    def _combine(self, a, b, where):
        out, final, swap = [], True, False
        for (ca, sa), (cb, sb) in zip(a, b):
            if ca != cb:
                raise ScheduleError("%s: reduces chunk %d with chunk %d" % (where, ca, cb))
            if sa & sb:
                raise ScheduleError("%s: ranks %s would be counted twice in chunk %d" %
                                    (where, sorted(sa & sb), ca))
            out.append((ca, sa | sb))
            final = final and len(sa | sb) == self.nranks
            swap = min(sb) < min(sa)
        return out, final, swap

    # ---- steps ----
    def send(self, src, to):
        """Send src to rank `to` (received there by the matching recv / recv_reduce)."""
        self._check_peer(src.rank, to)
        key = (src.rank, to)
        tag = self._tags.get(key, 0)
        self._tags[key] = (tag + 1) % TAG_LIMIT
        prev = self._last_tag.get((src.rank, "send", to, tag))
        i = self._add(src.rank, "send", "%d %d %s %d" % (to, tag, src._text(), src.n), [src], [],
                      extra=[prev] if prev is not None else [])
        self._last_tag[(src.rank, "send", to, tag)] = i
        self._sent.setdefault(key, []).append((tag, src.n, self._get(src)))
        return i

    def recv(self, dst, frm):
        """Receive the oldest unreceived message of rank `frm` to dst.rank into dst."""
        self._check_place(dst, True)
        tag, data = self._take(frm, dst)
        prev = self._last_tag.get((dst.rank, "recv", frm, tag))
        i = self._add(dst.rank, "recv", "%d %d %s %d" % (frm, tag, dst._text(), dst.n), [], [dst],
                      extra=[prev] if prev is not None else [])
        self._last_tag[(dst.rank, "recv", frm, tag)] = i
        self._put(dst, data)
        return i

    def recv_reduce(self, dst, frm, local=None, tmp=None):
        """Receive from `frm` into tmp (a scratch place; two are taken per size by default),
        then dst = local op received (local defaults to dst)."""
        local = dst if local is None else local
        if tmp is None:
            slots = self._tmp[dst.rank].setdefault(dst.n, [None, None, 0])
            k = slots[2]
            slots[2] ^= 1
            if slots[k] is None:  # a new place after the scratch the constructor reserved
                slots[k] = self._reserved + self._auto[dst.rank]
                self._auto[dst.rank] += dst.n
            tmp = self.scratch(dst.rank, slots[k], dst.n)
        self.recv(tmp, frm)
        return self.reduce(dst, local, tmp)

    def reduce(self, dst, a, b):
        """dst = a op b on one rank (operands put in the lower rank's order; final if complete)."""
        if not dst.rank == a.rank == b.rank or not dst.n == a.n == b.n:
            raise ScheduleError("reduce: %r, %r, %r are not places of one rank and size" %
                                (dst, a, b))
        self._check_place(dst, True)
        data, final, swap = self._combine(self._get(a), self._get(b), "rank %d" % dst.rank)
        if swap:
            a, b = b, a
        i = self._add(dst.rank, "reduce", "%s %s %s %d" % (dst._text(), a._text(), b._text(),
                                                          dst.n), [a, b], [dst], final=final)
        self._put(dst, data)
        return i

    def copy(self, dst, src):
        """dst = src on one rank."""
        if dst.rank != src.rank or dst.n != src.n:
            raise ScheduleError("copy: %r and %r are not places of one rank and size" % (dst, src))
        self._check_place(dst, True)
        data = self._get(src)
        i = self._add(dst.rank, "copy", "%s %s %d" % (dst._text(), src._text(), dst.n), [src],
                      [dst])
        self._put(dst, data)
        return i

    def transfer(self, src, dst):
        """send(src, dst.rank) and recv(dst, src.rank)."""
        self.send(src, dst.rank)
        return self.recv(dst, src.rank)

    def transfer_reduce(self, src, dst, local=None, tmp=None):
        """send(src, dst.rank) and recv_reduce(dst, src.rank, local, tmp)."""
        self.send(src, dst.rank)
        return self.recv_reduce(dst, src.rank, local, tmp)

    def _check_peer(self, rank, peer):
        if not 0 <= peer < self.nranks or peer == rank:
            raise ScheduleError("rank %d cannot send to %r" % (rank, peer))

    def _take(self, frm, dst):
        queue = self._sent.get((frm, dst.rank))
        if not queue:
            raise ScheduleError("rank %d receives from rank %d, which sent it nothing more" %
                                (dst.rank, frm))
        tag, n, data = queue.pop(0)
        if n != dst.n:
            raise ScheduleError("rank %d receives %d chunks from rank %d, which sent %d" %
                                (dst.rank, dst.n, frm, n))
        return tag, data

    # ---- checks and output ----
    def check(self):
        """Symbolic check: every message received, and every rank's output chunk c holding chunk
        c of every rank once. Raises ScheduleError; returns self."""
        for (a, b), q in self._sent.items():
            if q:
                raise ScheduleError("%d messages of rank %d to rank %d are never received" %
                                    (len(q), a, b))
        full = frozenset(range(self.nranks))
        for r in range(self.nranks):
            for c in range(self.chunks):
                d = self._data[r].get(("o", c))
                if d is None and self.inplace == "only":
                    d = self._data[r].get(("i", c))
                if d is None:
                    raise ScheduleError("rank %d never writes output chunk %d" % (r, c))
                if d != (c, full):
                    raise ScheduleError("rank %d's output chunk %d holds chunk %d of ranks %s" %
                                        (r, c, d[0], sorted(d[1])))
        return self

    def text(self):
        """The schedule file's text (format version 1)."""
        lines = ["mpiar-schedule %d" % VERSION]
        if self.name:
            lines.append("name %s" % self.name)
        lines += ["collective allreduce", "ranks %d" % self.nranks, "chunks %d" % self.chunks,
                  "scratch %d" % self.scratch_chunks, "inplace %s" % self.inplace,
                  "order %s" % self.order]
        for r in range(self.nranks):
            lines.append("rank %d" % r)
            for kind, fields, final, deps in self.steps[r]:
                line = "%s %s%s" % (kind, fields, " final" if final else "")
                if deps:
                    line += " : " + " ".join(map(str, deps))
                lines.append(line)
        lines.append("end")
        return "\n".join(lines) + "\n"

    def save(self, path):
        """Write the file (after check()). Returns path."""
        self.check()
        with open(path, "w") as f:
            f.write(self.text())
        return path

    def verify(self, nbytes=None, sim=None, extra_args=()):
        """Run mpiar-sim --schedule on the file: the simulator's checks (messages matched, no
        hazard, every rank ending with the full reduction; see docs/schedules.md) and its time
        beside the built-in algorithms. `sim` names the program (default: $MPIAR_SIM, else
        mpiar-sim on PATH). Returns its report; raises ScheduleError when a check fails."""
        self.check()
        sim = sim or os.environ.get("MPIAR_SIM") or shutil.which("mpiar-sim")
        if not sim:
            raise ScheduleError("mpiar-sim not found: set MPIAR_SIM or put it on PATH")
        with tempfile.TemporaryDirectory() as d:
            path = self.save(os.path.join(d, (self.name or "schedule") + ".sched"))
            cmd = [sim, "--schedule", path] + (["--bytes", str(nbytes)] if nbytes else [])
            p = subprocess.run(cmd + list(extra_args), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True)
        if p.returncode != 0:
            raise ScheduleError("mpiar-sim --schedule failed (exit %d):\n%s" %
                                (p.returncode, p.stdout))
        return p.stdout
