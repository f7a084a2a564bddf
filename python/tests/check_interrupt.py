"""Ctrl-C during a call that waits for a late rank: KeyboardInterrupt on the interrupted rank
within a fraction of a second, an mpiar error (not a wait) on the others, and a communicator that
fails every later call. Run on 2 ranks: rank 1 is late by 4 s, rank 0 gets SIGINT 1 s into its
wait (from a thread of its own). The bounds are seconds wide."""

import os
import signal
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

import mpiar

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"rank {rank}: check failed: {what}", file=sys.stderr, flush=True)


def interrupt_after(seconds):
    def fire():
        time.sleep(seconds)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=fire, daemon=True).start()


def case(name, call):
    comm = world.Dup()
    x = np.ones(1000, dtype=np.float32)
    mpiar.allreduce(x, comm=comm)  # the communicator's context exists
    world.Barrier()
    if rank == size - 1:
        time.sleep(4)
        try:
            call(x, comm)
            late = "completed"  # it had every message it needed before rank 0 gave up
        except mpiar.CommBrokenError as e:
            late = "broken"
            check("interrupt" in e.detail, f"{name}: the notice does not say why: {e.detail}")
        print(f"rank {rank}: {name}: the late rank's call {late}", flush=True)
    else:
        if rank == 0:
            interrupt_after(1.0)
        t0 = time.monotonic()
        try:
            call(x, comm)
            check(rank != 0, f"{name}: the interrupted call returned")
        except KeyboardInterrupt:
            spent = time.monotonic() - t0
            check(rank == 0, f"{name}: KeyboardInterrupt on rank {rank}")
            check(spent < 3.0, f"{name}: KeyboardInterrupt after {spent:.2f} s (SIGINT at 1 s)")
            print(f"rank {rank}: {name}: KeyboardInterrupt after {spent:.2f} s", flush=True)
        except mpiar.CommBrokenError:
            check(rank != 0, f"{name}: CommBrokenError on the interrupted rank")
    # The communicator is broken everywhere: every later call fails at once.
    try:
        mpiar.allreduce(x, comm=comm)
        check(False, f"{name}: a call after the interruption succeeded")
    except mpiar.Error:
        pass
    comm.Free()
    world.Barrier()


case("allreduce", lambda x, comm: mpiar.allreduce(x, comm=comm))
case("wait", lambda x, comm: mpiar.iallreduce(x, comm=comm).wait())

total = world.allreduce(len(failures))
if rank == 0:
    print(f"interrupt on {size} ranks: {'FAILED' if total else 'passed'} ({total} failed checks)")
sys.exit(1 if total else 0)
