"""verl_ext.cpu_runtime.loopback_store: rank 0's store listens on the address its ranks reach it at, not on every
interface, and the ranks meet through it (the whole path through verl's process-group start-up in a CPU-platform
process: tests/cpu/test_registration.py)."""

import socket
import threading
from datetime import timedelta

import psutil
import pytest

from verl_ext.cpu_runtime.loopback_store import INIT_METHOD, register_scheme, serve_store


def listening_addresses(port: int) -> list[str]:
    """The addresses this process listens on at ``port``."""
    return sorted(connection.laddr.ip for connection in psutil.Process().net_connections("tcp")
                  if connection.status == "LISTEN" and connection.laddr.port == port)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_store_on_a_free_port_listens_on_its_host_only_and_serves_its_clients():
    from torch.distributed import TCPStore

    store = serve_store("127.0.0.1", 0, timeout=timedelta(seconds=30), wait_for_workers=False)
    assert store.port > 0 and listening_addresses(store.port) == ["127.0.0.1"]
    client = TCPStore("127.0.0.1", store.port, is_master=False, timeout=timedelta(seconds=30))
    client.set("weights", "v1")
    assert store.get("weights") == b"v1"
    plain = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)  # torch's own, for contrast
    assert "127.0.0.1" not in listening_addresses(plain.port)  # '::' or '0.0.0.0': every interface


def test_two_ranks_meet_through_the_scheme_and_rank_0s_store_listens_on_master_addr_only(monkeypatch):
    import torch.distributed as dist

    register_scheme()
    register_scheme()  # a second registration in one process is harmless
    port = free_port()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    stores = {}

    def meet(rank):
        store, got_rank, world_size = next(dist.rendezvous(INIT_METHOD, rank=rank, world_size=2,
                                                           timeout=timedelta(seconds=60)))
        stores[rank] = (store, got_rank, world_size)

    ranks = [threading.Thread(target=meet, args=(rank,)) for rank in (0, 1)]
    for thread in ranks:
        thread.start()
    for thread in ranks:
        thread.join(timeout=90)
    assert sorted(stores) == [0, 1]
    assert [stores[rank][1:] for rank in (0, 1)] == [(0, 2), (1, 2)]
    stores[1][0].set("from rank 1", "hello")
    assert stores[0][0].get("from rank 1") == b"hello"
    assert listening_addresses(port) == ["127.0.0.1"]


def test_a_missing_variable_is_named(monkeypatch):
    import torch.distributed as dist

    register_scheme()
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(ValueError, match="verl-ext-loopback:// rendezvous: environment variable MASTER_ADDR expected"):
        next(dist.rendezvous(INIT_METHOD, rank=0, world_size=1))
