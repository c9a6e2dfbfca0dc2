"""Per-request sampling seeds: a response is a function of the run's seed and of which response it is.

A rollout engine that draws every request's tokens from one shared random stream makes a response
depend on the order in which requests arrive and on which requests share a batched call -- both set
by thread and process scheduling, so two runs of the same command differ. Instead every request
carries its own seed, derived from what identifies the response and nothing else:

    seed = H(run_seed, global_step, prompt_index, prompt_digest, session, turn) mod 2^63

- ``run_seed``: ``actor_rollout_ref.rollout.seed`` (the run's sampling seed);
- ``global_step``: the trainer step whose batch the prompt belongs to (verl's ``global_steps`` of the
  batch: in ``sync`` the step that trains on it; ``delayed_sync`` labels its batches the same way), so
  a prompt drawn again in a later epoch gets fresh randomness;
- ``prompt_index``: the dataset row's ``extra_info.index`` (verl's ``index`` column);
- ``prompt_digest``: sha256 of the prompt's token ids at this turn, so two prompts that share an index
  (a dataset without ``extra_info.index``: verl sets 0) still get different seeds;
- ``session``: which of the ``rollout.n`` responses to the prompt (verl's ``session_id``, 0..n-1);
- ``turn``: the how-many-th generation call of that response (0 for a single-turn agent; 0, 1, 2, ... for the
  turns of a multi-turn tool agent).

H is sha256 over a canonical JSON encoding, so the seed is the same in every process, Python version and
platform (unlike ``hash()``, salted per process). Not in it: the prompt's ``uid`` (verl draws it with
``uuid4``), the request id (also ``uuid4``), the arrival order, the batch a request is generated in, the
replica serving it and the agent-loop worker running it. Two requests collide only if every field is
equal -- the same prompt twice in one step with one index, which a dataset with ``extra_info.index``
never produces -- or by a 2^-63 accident.

The engine turns the seed into a generator of its own for that request (CPU rollout:
:mod:`verl_ext.cpu_runtime.generation`; vLLM: ``SamplingParams.seed``), so the draws of one request never depend
on another's. The agent loop that sends these seeds is :data:`SEEDED_AGENT_LOOP`
(:mod:`verl_ext.seeded_agent_loop`, which imports verl and this module; this module imports neither).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

# verl agent-loop name of verl_ext.seeded_agent_loop.SeededSingleTurnAgentLoop
# (actor_rollout_ref.rollout.agent.default_agent_loop)
SEEDED_AGENT_LOOP = "seeded_single_turn_agent"
# ... and of verl_ext.seeded_agent_loop.SeededToolAgentLoop: verl's multi-turn tool agent loop, a seed per turn
SEEDED_TOOL_AGENT_LOOP = "seeded_tool_agent"
SEED_BITS = 63  # a non-negative int64: what torch.Generator.manual_seed and vLLM's SamplingParams.seed accept


def token_digest(token_ids: Sequence[int]) -> str:
    """sha256 (hex) of a token-id sequence."""
    return hashlib.sha256(json.dumps([int(token) for token in token_ids]).encode()).hexdigest()


def derive_seed(*parts: Any) -> int:
    """A seed in [0, 2^63) from JSON-encodable ``parts``; equal parts give equal seeds in every process."""
    encoded = json.dumps([_plain(part) for part in parts], separators=(",", ":"), sort_keys=True)
    digest = hashlib.sha256(encoded.encode()).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)


def request_seed(
    run_seed: int, global_step: int, prompt_index: Any, prompt_ids: Sequence[int], session: int, turn: int
) -> int:
    """The sampling seed of one generation request (see the module docstring)."""
    return derive_seed(
        "verl_ext.request_seed",
        int(run_seed),
        int(global_step),
        prompt_index,
        token_digest(prompt_ids),
        int(session),
        int(turn),
    )


def _plain(value: Any) -> Any:
    """numpy scalars and other int/str-like values as plain JSON values (a numpy int64 is not JSON)."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return _plain(value.item())
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    raise TypeError(f"cannot derive a seed from a {type(value).__name__}: {value!r}")
