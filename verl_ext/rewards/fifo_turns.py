"""Waiting in line for a shared resource: served in arrival order, each waiter giving up at its own deadline.

``threading.Semaphore`` and ``Condition.notify`` promise no order, so under load a call can be passed over
again and again while later calls are served (an easy math check waiting behind many slow ones). Here a
caller is served only when it is first in line *and* the resource is ready; a caller whose deadline
passes leaves the line, and the one behind it moves up.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable


class FifoTurns:
    """A line of waiters on ``condition``; whoever changes the resource's state must ``notify_all`` it."""

    def __init__(self, condition: threading.Condition):
        self._condition = condition
        self._line: deque[object] = deque()

    def __len__(self) -> int:
        return len(self._line)

    def wait(self, ready: Callable[[], bool], deadline: float) -> bool:
        """Call with the condition held. True once first in line and ``ready()``; False at ``deadline``
        (``time.monotonic()`` seconds). Either way the caller has left the line when this returns."""
        ticket = object()
        self._line.append(ticket)
        try:
            while True:
                if self._line[0] is ticket and ready():
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._condition.wait(remaining)
        finally:
            self._line.remove(ticket)
            self._condition.notify_all()  # the next in line may be served now
