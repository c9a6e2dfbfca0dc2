"""verl's ``RolloutReplica`` for rollout name ``cpu``: launches one :class:`CPURolloutServer` per replica.

verl's ``LLMServerManager`` creates the replicas (``init_hybrid`` with the actor workers in the sync and
colocated-async trainers, ``init_standalone`` for separate rollout resources) and hands their server
handles to its load balancer; the trainer's checkpoint manager calls ``sleep``/``wake_up`` on them. The
server is placed on the node of the replica's first worker, as verl's vLLM replica does.
"""

from __future__ import annotations

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from verl_ext.cpu_runtime.rollout_server import CPURolloutServer
from verl_ext.cpu_runtime.server_adapter import require_single_rank_replicas, server_actor_name


def _rollout_replica_base() -> type:
    from verl.workers.rollout.replica import RolloutReplica

    return RolloutReplica


class CPURolloutReplica(_rollout_replica_base()):
    """A single-process rollout replica generating with ``transformers`` on the CPU."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        require_single_rank_replicas(self.config)
        self.server_class = ray.remote(CPURolloutServer)

    def _role(self) -> str:
        if self.is_reward_model:
            return "reward_"
        if self.is_teacher_model:
            return "teacher_"
        return ""

    async def launch_servers(self):
        if len(self.workers) != self.world_size:
            raise RuntimeError(f"CPU rollout replica {self.replica_rank}: {len(self.workers)} workers, expected 1")
        node_id = await self.workers[0].__ray_call__.remote(lambda worker: ray.get_runtime_context().get_node_id())
        name = server_actor_name(self.replica_rank, 0, self._role(), self.name_suffix)
        server = self.server_class.options(
            name=name,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            max_concurrency=self.max_concurrency,
        ).remote(
            config=self.config,
            model_config=self.model_config,
            rollout_mode=self.rollout_mode,
            replica_rank=self.replica_rank,
            node_rank=0,
        )
        await server.ready.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"cpu-rollout://{name}"

    async def weight_state(self) -> dict:
        """The weights this replica's server holds: version, checksum, whether they are usable."""
        return await self._server_handle.weight_state.remote()
