"""Ray on this machine's loopback interface only: what verl-ext starts never listens on the network.

Ray picks one address per node (its *node IP*) and binds its servers to it: the GCS, each raylet's node and
object managers, the dashboard and runtime-env agents, the Ray client server and every worker's RPC server
listen on that address only when it is the loopback address (Ray 2.60 decides it per server, from the node
IP), and on every interface (``0.0.0.0`` / ``::``) otherwise. Left alone, Ray 2.60 on Linux takes the
machine's routable address as the node IP, and turns an explicit ``127.0.0.1`` into it too
(``ray._private.services.resolve_ip_for_localhost``, for ``ray start --node-ip-address``, the
``--address`` of a node that joins, and ``ray.init(_node_ip_address=...)``): a plain one-node ``ray.init()`` had
8 of its 9 listening sockets on all interfaces (the ninth on the network address), the nodes of
``verl_ext.cpu.local_cluster`` 10 of 12.
verl's ``ray_kwargs.ray_init`` cannot change it (the address it passes is resolved the same way).

Two ways to keep the node IP on loopback, for the two kinds of Ray process verl-ext starts:

- a process that starts a one-node Ray with ``ray.init()`` or joins a local cluster as a driver:
  :data:`LOOPBACK_ENVIRONMENT` (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, Ray's own switch for one-machine
  Ray, named for the platforms where it is the default; read when Ray is imported). The CPU profile sets it
  for ``main_ppo``, the local cluster for the command it runs. A process that imported Ray already:
  :func:`loopback_in_this_process`;
- a node of the local cluster (``ray start``), which Ray refuses to start as a worker node under that switch:
  ``python -m verl_ext.cpu.ray_loopback start ...`` runs Ray's own command line with the node IP resolved to
  ``127.0.0.1`` (:func:`main`; a patch of Ray's ``get_node_ip_address`` in that process only, listed in
  :mod:`verl_ext.verl_internals`). Every process the node starts gets the node IP on its command line.

Only where Ray is local: a cluster spanning machines needs the routable address, and verl-ext never starts one.
Importing this module does not import Ray.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator, Optional, Sequence

LOOPBACK_IP = "127.0.0.1"
# Ray reads it once, when ray._private.ray_constants is imported (ENABLE_RAY_CLUSTER = not this)
LOOPBACK_VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
LOOPBACK_ENVIRONMENT = {LOOPBACK_VARIABLE: "0"}
LOOPBACK_REASON = (
    "a Ray started here listens on loopback only (Ray's switch for one-machine Ray: the node IP is 127.0.0.1, "
    "never the machine's network address; verl_ext.cpu.ray_loopback)"
)


def node_command(arguments: Sequence[str]) -> list[str]:
    """The command line of ``ray <arguments>`` (``start --block ...``) with the node IP on loopback."""
    return [sys.executable, "-m", __name__, *arguments]


@contextlib.contextmanager
def loopback_in_this_process() -> Iterator[None]:
    """Within the block, a ``ray.init()`` in this process (a new one-node Ray, or a driver joining a local
    cluster at ``127.0.0.1``) takes ``127.0.0.1`` as its node IP even if Ray was imported before
    :data:`LOOPBACK_ENVIRONMENT` was set; restored afterwards (Ray keeps the node IP it started with)."""
    from ray._private import ray_constants

    before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


def _loopback_node_ip_address(address: Optional[str] = None) -> str:
    """What Ray's ``services.get_node_ip_address`` answers in a node started by :func:`main`."""
    return LOOPBACK_IP


def main(argv: Optional[Sequence[str]] = None) -> None:
    """``ray <argv>`` (Ray's command line, as ``python -m ray.scripts.scripts``) with the node IP on loopback."""
    from ray._private import services
    from ray.scripts import scripts

    services.get_node_ip_address = _loopback_node_ip_address  # resolve_ip_for_localhost calls it too
    sys.argv = ["ray", *(sys.argv[1:] if argv is None else argv)]
    scripts.main()


if __name__ == "__main__":
    main()
