"""Waiting in line for a shared resource: served in arrival order, each waiter giving up at its own deadline.

``threading.Semaphore`` and ``Condition.notify`` promise no order, so under load a call can be passed over
again and again while later calls are served (an easy math check waiting behind many slow ones). Here a
caller is served only when it is first in line *and* the resource is ready; a caller whose deadline
passes leaves the line, and the one behind it moves up.

Only the first in line is woken when the resource changes (:meth:`FifoTurns.notify`): each waiter waits
on its own condition (sharing the one lock), so an event costs one wake-up, not one per waiter. With
``n`` waiters, waking them all (``notify_all``) made every event cost ``n`` wake-ups, each needing the
lock and the GIL: a waiter whose deadline had come then waited for them (8 ms past its deadline with 24
waiters on a loaded 2-core machine, measured).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable


class FifoTurns:
    """A line of waiters sharing ``condition``'s lock; whoever changes the resource's state calls
    :meth:`notify` with the lock held."""

    def __init__(self, condition: threading.Condition):
        self._condition = condition
        self._line: deque[threading.Condition] = deque()

    def __len__(self) -> int:
        return len(self._line)

    def notify(self) -> None:
        """Wake the first in line, to look at the resource again (call with the condition held)."""
        if self._line:
            self._line[0].notify()

    def wait(self, ready: Callable[[], bool], deadline: float) -> bool:
        """Call with the condition held. True once first in line and ``ready()``; False at ``deadline``
        (``time.monotonic()`` seconds). Either way the caller has left the line when this returns."""
        ticket = threading.Condition(self._condition)  # the same lock, its own waiters
        self._line.append(ticket)
        try:
            while True:
                if self._line[0] is ticket and ready():
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                ticket.wait(remaining)
        finally:
            self._line.remove(ticket)
            self.notify()  # the next in line may be served now
