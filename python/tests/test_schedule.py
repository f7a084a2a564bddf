"""mpiar.schedule (pure Python): the API's checks, the text it writes, and the examples of
examples/schedules verified through mpiar-sim --schedule (MPIAR_SIM) at p = 2..8. With
MPIAR_SCHEDULE_DIR set, the examples' files are left there for the runs under MPI
(run_schedules.py)."""

import importlib
import os
import sys

import pytest

from mpiar.schedule import Schedule, ScheduleError

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                        "schedules")
sys.path.insert(0, EXAMPLES)
NAMES = ["ring", "recursive_doubling", "bidirectional_ring"]


def ring2():
    s = Schedule(2, chunks=2, name="r2")
    s.transfer_reduce(s.input(0, 0), s.output(1, 0), local=s.input(1, 0))
    s.transfer_reduce(s.input(1, 1), s.output(0, 1), local=s.input(0, 1))
    s.transfer(s.output(0, 1), s.output(1, 1))
    s.transfer(s.output(1, 0), s.output(0, 0))
    return s


def test_text():
    t = ring2().check().text()
    assert t.startswith("mpiar-schedule 1\nname r2\ncollective allreduce\nranks 2\nchunks 2\n")
    assert "scratch 1\ninplace no\norder none\nrank 0\n" in t
    # Rank 1 reduces chunk 0 with rank 0's contribution first, and the result is final.
    assert "reduce o0 s0 i0 1 final : 0" in t
    assert t.endswith("end\n")


def test_errors():
    s = Schedule(2, chunks=2)
    with pytest.raises(ScheduleError, match="sent it nothing"):
        s.recv(s.output(0, 0), 1)
    with pytest.raises(ScheduleError, match="may not write the input"):
        s.copy(s.input(0, 0), s.output(0, 0))
    with pytest.raises(ScheduleError, match="holds nothing yet"):
        s.send(s.output(0, 0), 1)
    with pytest.raises(ScheduleError, match="outside the 2 chunks"):
        s.input(0, 1, n=2)
    with pytest.raises(ScheduleError, match="cannot send"):
        s.send(s.input(0, 0), 0)
    s.send(s.input(0, 0, n=2), 1)
    with pytest.raises(ScheduleError, match="receives 1 chunks from rank 0, which sent 2"):
        s.recv(s.output(1, 0), 0)
    s = Schedule(2, chunks=1)
    s.transfer_reduce(s.input(0, 0), s.output(1, 0), local=s.input(1, 0))
    with pytest.raises(ScheduleError, match=r"ranks \[1\] would be counted twice"):
        s.reduce(s.output(1, 0), s.output(1, 0), s.input(1, 0))
    with pytest.raises(ScheduleError, match="never writes output chunk"):
        Schedule(2, chunks=1).check()
    for bad in (dict(nranks=0, chunks=1), dict(nranks=2, chunks=0),
                dict(nranks=2, chunks=1, inplace="maybe"), dict(nranks=2, chunks=1, name="a b")):
        with pytest.raises(ScheduleError):
            Schedule(**bad)


def test_unreceived():
    s = ring2()
    s.send(s.output(0, 0), 1)
    with pytest.raises(ScheduleError, match="never received"):
        s.check()


@pytest.mark.parametrize("name", NAMES)
def test_examples(name):
    sim = os.environ.get("MPIAR_SIM")
    if not sim:
        pytest.skip("MPIAR_SIM is not set")
    out = os.environ.get("MPIAR_SCHEDULE_DIR")
    mod = importlib.import_module(name)
    for p in range(2, 9):
        s = mod.build(p)
        report = s.verify(nbytes=p * 2 * 4096)
        assert "verified: every message matched" in report
        assert "verified in place" in report
        assert "<- the file" in report
        if out:
            os.makedirs(out, exist_ok=True)
            s.save(os.path.join(out, "%s_p%d.sched" % (name, p)))


def test_verify_refuses():
    sim = os.environ.get("MPIAR_SIM")
    if not sim:
        pytest.skip("MPIAR_SIM is not set")
    s = ring2()
    s.inplace = "yes"  # rank 1 reads its input after writing its output: wrong in place
    with pytest.raises(ScheduleError, match="FAILED in place"):
        s.verify()
