"""Bidirectional ring: half of the chunks go round the ring clockwise, the other half
counter-clockwise, at the same time. On a 1D ring network (mpiar-sim --topology torus:P) each
rank drives both of its links, where the ring of the built-in algorithms uses one."""
import sys

from mpiar.schedule import Schedule


def build(p):
    s = Schedule(p, chunks=2 * p, name="bidirectional_ring_p%d" % p, inplace="yes")
    turns = ((1, 0), (-1, p))  # (direction, first chunk of that direction's half)
    for k in range(p - 1):  # reduce-scatter, both directions at each step
        for r in range(p):
            for d, base in turns:
                c, nxt = base + (r - d * k) % p, (r + d) % p
                src = s.input(r, c) if k == 0 else s.output(r, c)
                s.transfer_reduce(src, s.output(nxt, c), local=s.input(nxt, c))
    for k in range(p - 1):  # allgather: rank r finished chunk r + d of each half
        for r in range(p):
            for d, base in turns:
                c = base + (r + d - d * k) % p
                s.transfer(s.output(r, c), s.output((r + d) % p, c))
    return s


if __name__ == "__main__":
    p = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    build(p).save(sys.argv[2] if len(sys.argv) > 2 else "bidirectional_ring_p%d.sched" % p)
