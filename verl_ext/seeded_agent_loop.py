"""``seeded_single_turn_agent``: verl's single-turn agent loop whose every request carries its own seed.

Select it with ``actor_rollout_ref.rollout.agent.default_agent_loop=seeded_single_turn_agent`` (the CPU
profile does; a dataset's ``agent_name`` column overrides it per row, as for any agent loop). It is verl's
``SingleTurnAgentLoop`` unchanged except that each ``generate`` call it makes adds
``sampling_params["seed"]`` = :func:`verl_ext.seeding.request_seed` of

    (actor_rollout_ref.rollout.seed, the batch's global_steps, the prompt's index, the prompt's token ids,
     the response's session_id, the call's turn)

-- all of which verl's v1 agent-loop worker (``AgentLoopWorkerTQ``) hands every agent loop: ``global_steps``
and ``index`` are columns of the batch, ``session_id`` is which of the ``rollout.n`` responses this is.
The rollout engine seeds a generator of its own for the request with it (the CPU rollout,
:mod:`verl_ext.cpu_runtime.generation`; verl's vLLM server passes ``sampling_params`` to vLLM's
``SamplingParams``, whose ``seed`` does the same; verl's ``full_determinism`` only sets a default seed
there, ``setdefault``, which this one takes precedence over).

``seeded_tool_agent`` is verl's multi-turn ``ToolAgentLoop`` with the same seeds, one per turn (the call's
``turn`` counts the response's generation calls: its assistant turns). Its ``max_tokens_per_turn`` (set in an agent
loop config file, ``actor_rollout_ref.rollout.agent.agent_loop_config_path``: ``- name: ..., _target_:
verl_ext.seeded_agent_loop.SeededToolAgentLoop, max_tokens_per_turn: 8``) caps each assistant turn (verl's loop
gives each turn the rest of the response budget, so a model that seldom ends a turn makes one long turn); null,
the default, is verl's behaviour. Each response also records the policy version of every one of its turns
(``extra_fields["turn_global_steps"]``): verl keeps only the first turn's and the last turn's
(``min_global_steps``/``max_global_steps``, whose difference is verl's ``trajectory_spans``).

Registered with verl's agent-loop registry (``register``) when verl imports its single-turn agent loop,
in whichever process does (:mod:`verl_ext.plugin` imports this module then).
"""

from __future__ import annotations

from typing import Any, Optional

from verl.experimental.agent_loop.agent_loop import register
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

from verl_ext.checks.tools import check_max_tokens_per_turn
from verl_ext.seeding import SEEDED_AGENT_LOOP, SEEDED_TOOL_AGENT_LOOP, request_seed

# what the seed is made of, besides the rollout seed: columns verl's v1 agent-loop worker passes every agent loop
REQUIRED_FIELDS = ("global_steps", "index", "session_id")


class SeedingServerClient:
    """verl's ``LLMServerClient`` for one response: each ``generate`` call gets the response's next seed."""

    def __init__(self, client: Any, run_seed: int, global_step: int, prompt_index: Any, session: int,
                 max_tokens_per_turn: Optional[int] = None):
        self._client = client
        self._seed_parts = (run_seed, global_step, prompt_index)
        self._session = session
        self._max_tokens_per_turn = max_tokens_per_turn
        self.turns = 0
        self.turn_versions: list[Any] = []  # the policy version (the engine's global_steps) of each call

    async def generate(self, request_id, *, prompt_ids, sampling_params: dict[str, Any], **kwargs: Any):
        seed = request_seed(*self._seed_parts, prompt_ids, self._session, self.turns)
        self.turns += 1
        params = {**sampling_params, "seed": seed}
        if self._max_tokens_per_turn is not None:
            params["max_tokens"] = min(self._max_tokens_per_turn, params.get("max_tokens", self._max_tokens_per_turn))
        output = await self._client.generate(request_id, prompt_ids=prompt_ids, sampling_params=params, **kwargs)
        self.turn_versions.append((getattr(output, "extra_fields", None) or {}).get("global_steps"))
        return output

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _seeding_client(agent_loop: Any, kwargs: dict[str, Any], max_tokens_per_turn: Optional[int] = None):
    missing = [name for name in REQUIRED_FIELDS if name not in kwargs]
    if missing:
        raise ValueError(
            f"agent loop {type(agent_loop).__name__} derives each request's seed from the batch columns "
            f"{list(REQUIRED_FIELDS)}, which verl's v1 trainer (AgentLoopWorkerTQ) passes; missing: {missing}"
        )
    return SeedingServerClient(
        agent_loop._unseeded_client,
        run_seed=int(agent_loop.rollout_config.seed),
        global_step=int(kwargs["global_steps"]),
        prompt_index=kwargs["index"],
        session=int(kwargs["session_id"]),
        max_tokens_per_turn=max_tokens_per_turn,
    )


@register(SEEDED_AGENT_LOOP)
class SeededSingleTurnAgentLoop(SingleTurnAgentLoop):
    """verl's single-turn agent loop with a per-request sampling seed (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._unseeded_client = self.server_manager

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any):
        self.server_manager = _seeding_client(self, kwargs)
        return await super().run(sampling_params, **kwargs)


@register(SEEDED_TOOL_AGENT_LOOP)
class SeededToolAgentLoop(ToolAgentLoop):
    """verl's multi-turn tool agent loop with a sampling seed per turn and an optional cap on each turn's tokens
    (see the module docstring)."""

    derives_turn_seeds = True  # verl_ext.checks.tools: requires rollout.seed and checks max_tokens_per_turn in the driver

    def __init__(self, *args: Any, max_tokens_per_turn: Optional[int] = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.max_tokens_per_turn = check_max_tokens_per_turn(max_tokens_per_turn)
        self._unseeded_client = self.server_manager

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any):
        client = _seeding_client(self, kwargs, self.max_tokens_per_turn)
        self.server_manager = client
        output = await super().run(sampling_params, **kwargs)
        output.extra_fields["turn_global_steps"] = list(client.turn_versions)
        return output
