"""How a cost grows with the input, without a wall-clock limit: the CPU time at 4n over the CPU time at n.

A linear cost gives about 4, a quadratic one about 16, whatever the machine's speed or load. Each time is the least
over several calls, the calls at n and at 4n taken in turn: the least is the call the load disturbed least (another
process's time slice falls on some calls, not on all), so a busy machine does not make a linear cost look quadratic.
Use an ``n`` at which a quadratic version's cost dominates (the sizes that once took seconds)."""

from __future__ import annotations

import gc
import time
from typing import Callable

LINEAR = 8.0  # the bound on cost_ratio for a linear cost: twice the 4 it should be, half the 16 of a quadratic one


def seconds(run: Callable[[], object]) -> float:
    """The CPU time of this thread for ``run()`` (its own work: not the time it waits for a core while other
    processes run, as under two test processes and the background runs), with the garbage collector paused (a full
    collection's cost is what the whole process holds, not the input; the paused collections run after)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        started = time.thread_time()
        run()
        return time.thread_time() - started
    finally:
        if collecting:
            gc.enable()


def cost_ratio(run: Callable[[int], object], n: int, tries: int = 7) -> float:
    """The least time of ``run(4 n)`` over the least time of ``run(n)``, over ``tries`` calls of each taken in turn
    (after one warm-up call: imports, caches); ``run`` checks its own result."""
    run(n)
    small = large = float("inf")
    for _ in range(tries):
        small = min(small, seconds(lambda: run(n)))
        large = min(large, seconds(lambda: run(4 * n)))
    return large / small
