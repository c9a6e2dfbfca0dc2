"""torch.distributed's rendezvous store, listening only on the address its ranks reach it at (CPU runs: loopback).

A process group meets at a ``TCPStore`` served by its rank 0. torch (2.11) binds that server to every interface
(``::``) whatever host name it is given; the other ranks connect to the host name. In a CPU run every rank is on
this machine and reaches rank 0 at ``127.0.0.1`` (verl's ``MASTER_ADDR`` is the node IP, which the CPU backend keeps
on loopback: :mod:`verl_ext.cpu.ray_loopback`), so the server has no reason to listen anywhere else. Here the socket
is bound first, to the host the ranks connect to, and handed to torch (``TCPStore``'s ``master_listen_fd``):

- :func:`serve_store`: rank 0's store on ``host`` only; the gloo checkpoint engine's rendezvous uses it too;
- the rendezvous scheme :data:`SCHEME`: torch's ``env://`` (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
  ``MASTER_PORT``) with that store. The CPU profile sets ``DIST_INIT_METHOD`` to :data:`INIT_METHOD`, which verl's
  workers pass to ``init_process_group`` (``verl.utils.distributed``; listed in :mod:`verl_ext.verl_internals`), and
  :func:`register_scheme` adds it with torch's public ``register_rendezvous_handler`` in every CPU-run process.

Only where the ranks share a machine's loopback; a group spanning machines needs the routable address
(verl-ext never starts one: every CPU run's Ray is on loopback).
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Iterator, Optional
from urllib.parse import parse_qs, urlparse

SCHEME = "verl-ext-loopback"
INIT_METHOD = f"{SCHEME}://"  # DIST_INIT_METHOD of a CPU run (verl_ext.cpu.profile)
INIT_METHOD_VARIABLE = "DIST_INIT_METHOD"  # read by verl's initialize_global_process_group(_ray)
INIT_METHOD_REASON = (
    "torch.distributed's store of the trainer's process group listens on MASTER_ADDR (loopback) only, not on every "
    "interface as torch's env:// does (verl_ext.cpu_runtime.loopback_store)"
)
DEFAULT_TIMEOUT = timedelta(minutes=30)  # torch's default_pg_timeout


def serve_store(host: str, port: int, world_size: Optional[int] = None, timeout: timedelta = DEFAULT_TIMEOUT,
                **kwargs):
    """Rank 0's ``TCPStore`` listening on ``host`` only (``port`` 0: a free one; the store's ``port`` says which).
    ``kwargs`` go to ``TCPStore`` (``wait_for_workers``, ``multi_tenant``, ``use_libuv``)."""
    from verl.utils.distributed import create_tcp_store  # hands the bound socket to torch (master_listen_fd)

    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(socket.SOMAXCONN)
    except OSError:
        listener.close()
        raise
    return create_tcp_store(host, listener.getsockname()[1], listener, world_size=world_size, is_master=True,
                            timeout=timeout, **kwargs)


def _required(variable: str) -> str:
    value = os.environ.get(variable)
    if not value:
        raise ValueError(f"{SCHEME}:// rendezvous: environment variable {variable} expected, but not set")
    return value


def rendezvous(url: str, timeout: timedelta = DEFAULT_TIMEOUT, **_kwargs) -> Iterator[tuple]:
    """torch's rendezvous handler contract (a generator of ``(store, rank, world_size)``): ``env://`` with rank 0's
    store on ``MASTER_ADDR`` only. ``rank`` and ``world_size`` come from the URL's query (``init_process_group``
    adds them when given) or from ``RANK`` and ``WORLD_SIZE``."""
    from torch.distributed import TCPStore

    query = {key: values[-1] for key, values in parse_qs(urlparse(url).query).items()}
    rank = int(query.get("rank") or _required("RANK"))
    world_size = int(query.get("world_size") or _required("WORLD_SIZE"))
    host, port = _required("MASTER_ADDR"), int(_required("MASTER_PORT"))
    if rank == 0:
        store = serve_store(host, port, world_size, timeout, multi_tenant=True)
    else:
        store = TCPStore(host, port, world_size, False, timeout)
    yield store, rank, world_size
    raise RuntimeError(f"{SCHEME}:// rendezvous: a group cannot meet again at the same store")


def register_scheme() -> None:
    """Make :data:`SCHEME` a rendezvous method of torch.distributed in this process (once; torch's public
    ``register_rendezvous_handler``)."""
    import importlib

    # the module (torch.distributed's attribute of that name is its rendezvous function)
    torch_rendezvous = importlib.import_module("torch.distributed.rendezvous")
    try:
        torch_rendezvous.register_rendezvous_handler(SCHEME, rendezvous)
    except RuntimeError:  # registered already, by an earlier call in this process
        pass
