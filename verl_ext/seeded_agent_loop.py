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
:mod:`verl_ext.cpu.generation`; verl's vLLM server passes ``sampling_params`` to vLLM's
``SamplingParams``, whose ``seed`` does the same; verl's ``full_determinism`` only sets a default seed
there, ``setdefault``, which this one takes precedence over).

Registered with verl's agent-loop registry (``register``) when verl imports its single-turn agent loop,
in whichever process does (:mod:`verl_ext.plugin` imports this module then).
"""

from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.agent_loop import register
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

from verl_ext.seeding import SEEDED_AGENT_LOOP, request_seed

# what the seed is made of, besides the rollout seed: columns verl's v1 agent-loop worker passes every agent loop
REQUIRED_FIELDS = ("global_steps", "index", "session_id")


class SeedingServerClient:
    """verl's ``LLMServerClient`` for one response: each ``generate`` call gets the response's next seed."""

    def __init__(self, client: Any, run_seed: int, global_step: int, prompt_index: Any, session: int):
        self._client = client
        self._seed_parts = (run_seed, global_step, prompt_index)
        self._session = session
        self.turns = 0

    async def generate(self, request_id, *, prompt_ids, sampling_params: dict[str, Any], **kwargs: Any):
        seed = request_seed(*self._seed_parts, prompt_ids, self._session, self.turns)
        self.turns += 1
        return await self._client.generate(
            request_id, prompt_ids=prompt_ids, sampling_params={**sampling_params, "seed": seed}, **kwargs
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@register(SEEDED_AGENT_LOOP)
class SeededSingleTurnAgentLoop(SingleTurnAgentLoop):
    """verl's single-turn agent loop with a per-request sampling seed (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._unseeded_client = self.server_manager

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any):
        missing = [name for name in REQUIRED_FIELDS if name not in kwargs]
        if missing:
            raise ValueError(
                f"agent loop {SEEDED_AGENT_LOOP!r} derives each request's seed from the batch columns "
                f"{list(REQUIRED_FIELDS)}, which verl's v1 trainer (AgentLoopWorkerTQ) passes; missing: {missing}"
            )
        self.server_manager = SeedingServerClient(
            self._unseeded_client,
            run_seed=int(self.rollout_config.seed),
            global_step=int(kwargs["global_steps"]),
            prompt_index=kwargs["index"],
            session=int(kwargs["session_id"]),
        )
        return await super().run(sampling_params, **kwargs)
