"""Child process that answers math-equivalence questions (started by :mod:`verl_ext.rewards.equivalence_pool`).

Protocol on stdin/stdout, one JSON object per line: it prints ``ready`` once its imports are done, then
for each request ``{"gold": str, "predicted": str}`` it answers ``{"equivalent": bool}``. It exits when
its stdin closes (so it never outlives its parent), ignores Ctrl-C (the parent handles it) and caps its
own address space (``VERL_EXT_MATH_MEMORY_MB``, default 4096) so a runaway sympy expression fails with
MemoryError instead of exhausting the machine. Anything a library prints goes to /dev/null, never into
the protocol.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys

from verl_ext.rewards.math_settings import DEFAULT_MEMORY_MB, MEMORY_ENV


def _limit_memory() -> None:
    try:
        import resource

        limit = int(os.environ.get(MEMORY_ENV, DEFAULT_MEMORY_MB)) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass


def serve() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    _limit_memory()
    logging.disable(logging.WARNING)

    from verl_ext.rewards.math_equivalence import are_equivalent, math_verify_equal

    math_verify_equal("x^2+2x+1", "(x+1)^2")  # import math-verify and sympy's lazy parts before saying ready
    protocol.write("ready\n")
    for line in sys.stdin:
        try:
            request = json.loads(line)
            equivalent = are_equivalent(str(request["gold"]), str(request["predicted"]))
        except BaseException:  # MemoryError, RecursionError, anything sympy raises: not equivalent
            equivalent = False
        protocol.write(json.dumps({"equivalent": bool(equivalent)}) + "\n")
