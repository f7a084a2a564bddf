"""Ring allreduce: a reduce-scatter ring and an allgather ring over p chunks."""
import sys

from mpiar.schedule import Schedule


def build(p):
    s = Schedule(p, chunks=p, name="ring_p%d" % p, inplace="yes")
    for k in range(p - 1):  # reduce-scatter: chunk c travels r -> r+1, summed on the way
        for r in range(p):
            c, nxt = (r - k) % p, (r + 1) % p
            src = s.input(r, c) if k == 0 else s.output(r, c)
            s.transfer_reduce(src, s.output(nxt, c), local=s.input(nxt, c))
    for k in range(p - 1):  # allgather: rank r finished chunk r+1; pass the finished chunks on
        for r in range(p):
            c = (r + 1 - k) % p
            s.transfer(s.output(r, c), s.output((r + 1) % p, c))
    return s


if __name__ == "__main__":
    p = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    build(p).save(sys.argv[2] if len(sys.argv) > 2 else "ring_p%d.sched" % p)
