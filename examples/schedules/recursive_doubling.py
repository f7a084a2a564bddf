"""Recursive doubling on any p: the ranks beyond the largest power of two q fold into ranks
0..p-q-1 first and get the result back at the end; q ranks exchange whole vectors log2(q) times."""
import sys

from mpiar.schedule import Schedule


def build(p):
    s = Schedule(p, chunks=1, name="recursive_doubling_p%d" % p, inplace="yes")
    q = 1 << (p.bit_length() - 1)  # the largest power of two <= p
    cur = [s.input(r, 0) for r in range(p)]  # where each rank's partial sum is
    for r in range(p - q):  # fold: rank q + r hands its vector to rank r
        s.transfer_reduce(s.input(q + r, 0), s.output(r, 0), local=s.input(r, 0))
        cur[r] = s.output(r, 0)
    d = 1
    while d < q:  # exchange with the partner at distance d, both ways at once
        for r in range(q):
            s.send(cur[r], r ^ d)
        for r in range(q):
            s.recv_reduce(s.output(r, 0), r ^ d, local=cur[r])
        cur[:q] = [s.output(r, 0) for r in range(q)]
        d *= 2
    for r in range(p - q):  # unfold: the result back to the folded ranks
        s.transfer(s.output(r, 0), s.output(q + r, 0))
    return s


if __name__ == "__main__":
    p = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    build(p).save(sys.argv[2] if len(sys.argv) > 2 else "recursive_doubling_p%d.sched" % p)
