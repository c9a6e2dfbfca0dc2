"""The listening-socket sampler the e2e runs use (tests/listening_sockets.py): it sees a child's sockets, on which
addresses, and which child of the sampler they are under."""

import os
import subprocess
import sys
import time

from tests.listening_sockets import LOOPBACK, ListeningSockets

LISTENS = """
import socket, sys
inner = socket.socket(); inner.bind(("127.0.0.1", 0)); inner.listen()
outer = socket.socket(); outer.bind(("0.0.0.0", 0)); outer.listen()
print("listening", flush=True)
sys.stdin.read()  # until the test closes it
"""


def test_a_childs_sockets_are_seen_with_their_addresses_and_the_child_they_are_under():
    with ListeningSockets(every=0.05) as sockets:
        child = subprocess.Popen([sys.executable, "-c", LISTENS, "marker-argument"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline() == "listening\n"
        # two samples at least while it listens: the sampler's interval is 50 ms
        seen = []
        while not seen:
            time.sleep(0.01)
            seen = [listener for listener in sockets.listeners if listener.pid == child.pid]
        child.stdin.close()
        child.wait(timeout=30)
    (listener,) = seen
    assert listener.addresses == {"127.0.0.1", "0.0.0.0"} and listener.addresses - LOOPBACK == {"0.0.0.0"}
    assert "marker-argument" in listener.under and listener.ancestors[0] == os.getpid()
