"""Seeded sampling on the CPU rollout: a response depends on its seed, prompt and weights only -- not on
the order requests arrive in, the requests that share its batch, or the replica that serves it.

Real: the tiny Qwen2 model, the CPU rollout server (in-process: the Ray actor runs the same class), verl's
configs, verl's single-turn agent loop under verl-ext's seeded subclass (built from the registry as verl's
agent-loop worker builds it). Checked against transformers' own logits processors where they exist.
"""

import asyncio
import random

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.cpu.test_rollout_server import PROMPT_LENGTH, make_server, prompt_ids, push, trainer_weights
from verl_ext.cpu_runtime.generation import (
    SamplingRequest,
    apply_repetition_penalty,
    draw_from,
    generate_batch_with_log_probs,
    prompt_width,
    sampling_distribution,
    sampling_request_from_params,
)
from verl_ext.cpu_runtime.rollout_server import DEFAULT_MAX_BATCH_SIZE
from verl_ext.seeding import request_seed

SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
BUDGET = dict(configured_prompt_length=16, configured_response_length=12, max_model_len=128)

logit_vectors = st.lists(st.floats(-20, 20, allow_nan=False, width=32), min_size=2, max_size=40, unique=True)


@settings(max_examples=60, deadline=None)
@example(logits=[-1.1754943508222875e-38, 0.0], top_k=2, top_p=0.5, temperature=1.0)  # a tie at the boundary
@example(logits=[0.0, 0.0, 0.2876820724517809], top_k=3, top_p=0.5, temperature=1.0)  # a tie past it
@given(logits=logit_vectors, top_k=st.integers(1, 45), top_p=st.floats(0.05, 1.0), temperature=st.floats(0.2, 2.0))
def test_distribution_keeps_what_transformers_top_k_and_top_p_keep(logits, top_k, top_p, temperature):
    from transformers import TopKLogitsWarper, TopPLogitsWarper

    z = torch.tensor(logits)
    q = sampling_distribution(z, temperature, top_k, top_p)
    assert q.dtype == torch.float64 and abs(q.sum().item() - 1.0) < 1e-12
    scores = (z / temperature).unsqueeze(0)
    if top_k < len(logits):
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(None, scores)
    reference_kept = torch.isfinite(scores[0])
    kept = q > 0
    # transformers computes the nucleus in float32, this in float64: they may disagree on a token whose
    # preceding mass is within float32 rounding of top_p; and on two tokens of equal probability that straddle
    # the boundary (the tie is broken by token id here, by transformers' unstable sort there): the same number
    # of tokens is kept. Elsewhere the sets are equal.
    disagreement = (kept != reference_kept).nonzero().flatten().tolist()
    probs = torch.softmax(z.double() / temperature, -1)
    if len(disagreement) == 2:
        first, second = probs[disagreement].tolist()
        assert kept.sum() == reference_kept.sum() and abs(first - second) <= 1e-6 * max(first, second), disagreement
        assert kept[min(disagreement)]  # ours keeps the lower id of the tie
        return
    assert len(disagreement) <= 1
    if disagreement:
        if top_k < len(logits):
            probs = torch.where(reference_kept | kept, probs, 0)
        order = torch.sort(probs, descending=True, stable=True).indices.tolist()
        before = probs[order[: order.index(disagreement[0])]].sum().item() / probs.sum().item()
        assert abs(before - top_p) < 1e-5


def test_inverse_cdf_draws_follow_the_distribution():
    probs = torch.tensor([0.5, 0.0, 0.2, 0.25, 0.05], dtype=torch.float64)
    generator = torch.Generator().manual_seed(3)
    draws = torch.tensor([draw_from(probs, generator) for _ in range(20_000)])
    frequencies = torch.bincount(draws, minlength=5).double() / len(draws)
    assert frequencies[1] == 0  # a token of probability 0 is never drawn
    assert torch.allclose(frequencies, probs, atol=0.015)


def test_repetition_penalty_is_transformers_and_vllms():
    from transformers import RepetitionPenaltyLogitsProcessor

    z = torch.tensor([2.0, -1.0, 0.5, -3.0, 1.0])
    seen = torch.tensor([0, 1, 1, 3])
    reference = RepetitionPenaltyLogitsProcessor(1.3)(seen.unsqueeze(0), z.unsqueeze(0).clone())[0]
    assert torch.equal(apply_repetition_penalty(z, seen, 1.3), reference)


def test_a_seed_must_be_an_integer_in_range():
    for bad in (-1, 2**63, 1.5, "7", True):
        with pytest.raises(ValueError, match="seed"):
            sampling_request_from_params({"seed": bad}, prompt_length_tokens=11, **BUDGET)
    assert sampling_request_from_params({"seed": 2**63 - 1}, prompt_length_tokens=11, **BUDGET).seed == 2**63 - 1


@pytest.fixture(scope="module")
def model_and_prompts(tiny_assets):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_assets / "model"))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_assets / "model"), dtype=torch.float32).eval()
    # 11, 9, 12, 15 and 14 tokens: rows of one batch are padded differently
    texts = ("count 1", "count", "count 12", "count 12345", "count 99 9")
    prompts = [prompt_ids(tiny_assets, text) for text in texts]
    return model, tokenizer, prompts


def generate(model, tokenizer, prompts, requests, rows=DEFAULT_MAX_BATCH_SIZE):
    """One batch as the server runs it: its default rows, prompts padded to their width at PROMPT_LENGTH."""
    width = prompt_width(max(len(prompt) for prompt in prompts), PROMPT_LENGTH)
    return generate_batch_with_log_probs(
        model, prompts, requests, eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id,
        rows=rows, width=width,
    )


@pytest.fixture
def caller_threads():
    """Sets torch's thread count for the test (restored after it)."""
    previous = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(previous)


def test_a_request_gives_the_same_bits_alone_and_in_any_batch_on_any_thread_count(model_and_prompts, caller_threads):
    """A row of a batch is exactly what its request gives alone, log-probs included: the other prompts
    (lengths, seeds, budgets), the row's position, a full batch (no inert row) and the caller's thread count
    change nothing. Without the fixed shape they do: a row alone and in a batch of 4 differ by up to 5e-7 in
    log-prob. Without the one thread too: with 3, MKL splits the 32 rows of a decode step 11/11/10 over the
    threads and computes the last row of a share (10, 21, 31) with another kernel, which moves the bits of
    the 14-token prompt's response from its third token on (seen at row 21)."""
    model, tokenizer, prompts = model_and_prompts
    rows = DEFAULT_MAX_BATCH_SIZE
    requests = [SamplingRequest(max_new_tokens=12, seed=100 + i) for i in range(len(prompts))]
    alone = [generate(model, tokenizer, [p], [r])[0] for p, r in zip(prompts, requests)]
    again = [generate(model, tokenizer, [p], [r])[0] for p, r in zip(prompts, requests)]
    assert alone == again  # bit for bit, log-probs included
    assert len({len(result.token_ids) for result in alone}) > 1  # responses of different lengths share batches
    rng = random.Random(0)
    checked = 0
    for threads in (1, 2, 3):
        caller_threads(threads)
        for size in (len(prompts), 9, rows, rows):
            neighbours = [(p, SamplingRequest(max_new_tokens=rng.choice((4, 12)), seed=rng.randrange(2**32)))
                          for p in rng.choices(prompts, k=size - len(prompts))]
            if size == rows and checked % 2:  # the last row of each thread's share at 3 threads, and the first
                positions = [0, 10, rng.randrange(11, 21), 31, 21]
            else:
                positions = rng.sample(range(size), len(prompts))
            batch = [None] * size
            for position, target in zip(positions, zip(prompts, requests)):
                batch[position] = target
            batch = [item if item is not None else neighbours.pop() for item in batch]
            results = generate(model, tokenizer, [p for p, _ in batch], [r for _, r in batch])
            assert [results[position] for position in positions] == alone, (threads, size, positions)
            checked += 1
    assert checked == 12


def test_different_seeds_give_different_responses(model_and_prompts):
    model, tokenizer, prompts = model_and_prompts
    responses = {
        tuple(generate(model, tokenizer, prompts[:1], [SamplingRequest(max_new_tokens=12, seed=seed)])[0].token_ids)
        for seed in range(8)
    }
    assert len(responses) >= 6


def seeded_requests(tiny_assets, run_seed=42):
    """(id, prompt, sampling params) for 4 prompts x 4 sessions, seeded as the seeded agent loop seeds them."""
    requests = []
    for index, text in enumerate(("count 1", "count 2", "count 3", "count 5")):
        prompt = prompt_ids(tiny_assets, text)
        for session in range(4):
            seed = request_seed(run_seed, 1, index, prompt, session, 0)
            requests.append((f"{index}-{session}", prompt, dict(SAMPLING, seed=seed)))
    return requests


async def serve(server, requests, groups):
    """Send ``requests`` to ``server`` as concurrent groups, one group after another."""
    out = {}
    for group in groups:
        results = await asyncio.gather(*[server.generate(prompt, dict(params), rid) for rid, prompt, params in group])
        out.update({rid: (tuple(r.token_ids), tuple(r.log_probs)) for (rid, _p, _s), r in zip(group, results)})
    return out


def new_server(tiny_assets, tmp_path, name, replica_rank=0, **options):
    server = make_server(tiny_assets, tmp_path / name)
    server.replica_rank = replica_rank
    for key, value in options.items():
        setattr(server, key, value)
    return server


def test_server_samples_do_not_depend_on_order_batches_or_replica(tiny_assets, tmp_path):
    """The same seeded requests, (a) one at a time in order, (b) shuffled and sent concurrently in uneven
    groups, (c) split over two replicas (world size 2), (d) all 16 at once, (e) through batches of at most
    5 (another number of rows): (a)-(d) give the same tokens and log-probs bit for bit; (e) the same
    tokens, log-probs within float rounding (the rows are part of what fixes the bits)."""
    requests = seeded_requests(tiny_assets)
    _, state = trainer_weights(tiny_assets)

    async def scenario():
        servers = {
            name: new_server(tiny_assets, tmp_path, name, rank, **options)
            for name, rank, options in (
                ("ordered", 0, {}),
                ("shuffled", 0, {"batch_wait_seconds": 0.01}),
                ("replica_0", 0, {}),
                ("replica_1", 1, {}),
                ("batched", 0, {"batch_wait_seconds": 0.05}),
                ("five_rows", 0, {"max_batch_size": 5, "batch_wait_seconds": 0.05}),
            )
        }
        for server in servers.values():
            await push(server, state, version=0)
        ordered = await serve(servers["ordered"], requests, [[request] for request in requests])
        shuffled_requests = requests[:]
        random.Random(1).shuffle(shuffled_requests)
        uneven_groups = [shuffled_requests[:3], shuffled_requests[3:10], shuffled_requests[10:]]
        shuffled = await serve(servers["shuffled"], requests, uneven_groups)
        split = {}
        split.update(await serve(servers["replica_1"], requests, [shuffled_requests[::2]]))
        split.update(await serve(servers["replica_0"], requests, [shuffled_requests[1::2]]))
        batched = await serve(servers["batched"], requests, [shuffled_requests])
        five_rows = await serve(servers["five_rows"], requests, [shuffled_requests])
        return ordered, shuffled, split, batched, five_rows

    ordered, shuffled, split, batched, five_rows = asyncio.run(scenario())
    assert len({tokens for tokens, _ in ordered.values()}) > 8  # the 16 responses are samples, not one answer
    assert shuffled == ordered
    assert split == ordered
    assert batched == ordered
    assert {rid: tokens for rid, (tokens, _) in five_rows.items()} == {rid: tokens for rid, (tokens, _) in ordered.items()}
    for rid, (_tokens, log_probs) in five_rows.items():
        assert max(abs(a - b) for a, b in zip(log_probs, ordered[rid][1])) < 1e-5


def test_unseeded_requests_get_seeds_in_arrival_order(tiny_assets, tmp_path):
    """A request without a seed (not sent by the seeded agent loop) still samples, reproducibly only when the
    requests come in the same order."""
    _, state = trainer_weights(tiny_assets)
    prompt = prompt_ids(tiny_assets, "count 3")

    async def responses(name):
        server = new_server(tiny_assets, tmp_path, name)
        await push(server, state, version=0)
        return [tuple((await server.generate(prompt, dict(SAMPLING), f"r{i}")).token_ids) for i in range(4)]

    first, second = asyncio.run(responses("a")), asyncio.run(responses("b"))
    assert first == second and len(set(first)) > 1


# ---------------------------------------------------------------------------------------------- agent loop


class ServerClient:
    """verl's LLMServerClient's ``generate`` signature over one in-process CPU rollout server (records the
    sampling parameters it was sent)."""

    def __init__(self, server):
        self.server = server
        self.sent = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.sent.append(dict(sampling_params))
        return await self.server.generate(prompt_ids, sampling_params, request_id, priority=kwargs.get("priority", 0))


@pytest.fixture(scope="module")
def cpu_config(tiny_assets):
    from tests.recipe_config import compose_recipe
    from verl_ext.cpu.profile import cpu_overrides

    return compose_recipe(*cpu_overrides(tiny_assets))


def agent_loop(config, tokenizer, client):
    """The agent loop the config names, built as verl's agent-loop worker builds it."""
    import hydra
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry

    name = config.actor_rollout_ref.rollout.agent.default_agent_loop
    return hydra.utils.instantiate(
        config=_agent_loop_registry[name],
        trainer_config=DictConfigWrap(config),
        server_manager=client,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type="qwen2",
        dataset_cls=None,
        data_config=DictConfigWrap(config.data),
    )


def test_the_cpu_profile_runs_the_seeded_agent_loop_and_its_responses_are_a_function_of_the_seed(
    tiny_assets, tmp_path, cpu_config
):
    from transformers import AutoTokenizer

    from verl_ext.seeded_agent_loop import SeededSingleTurnAgentLoop

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_assets / "model"))
    _, state = trainer_weights(tiny_assets)
    # (global step, prompt index, prompt, session) of 3 prompts x 3 sessions
    samples = [(1, index, f"count {index + 2}", session) for index in range(3) for session in range(3)]

    async def run_all(name, order, concurrent):
        server = new_server(tiny_assets, tmp_path, name, batch_wait_seconds=0.01)
        await push(server, state, version=0)
        client = ServerClient(server)

        async def one(sample):
            step, index, text, session = sample
            loop = agent_loop(cpu_config, tokenizer, client)
            assert isinstance(loop, SeededSingleTurnAgentLoop)
            output = await loop.run(
                dict(SAMPLING), raw_prompt=[{"role": "user", "content": text}], global_steps=step, index=index,
                session_id=session, uid=f"random-{name}-{index}",
            )
            return sample, tuple(output.response_ids)

        picked = [samples[i] for i in order]
        if concurrent:
            results = await asyncio.gather(*[one(sample) for sample in picked])
        else:
            results = [await one(sample) for sample in picked]
        return dict(results), client.sent

    in_order, sent = asyncio.run(run_all("in_order", range(len(samples)), concurrent=False))
    shuffled_order = list(range(len(samples)))
    random.Random(5).shuffle(shuffled_order)
    shuffled, _ = asyncio.run(run_all("shuffled", shuffled_order, concurrent=True))
    assert shuffled == in_order
    seeds = [params["seed"] for params in sent]
    assert len(set(seeds)) == len(samples)  # every response its own seed
    assert len(set(in_order.values())) > len(samples) // 2  # and the sessions of a prompt differ


def test_the_seeded_agent_loop_names_what_it_misses(tiny_assets, cpu_config):
    from transformers import AutoTokenizer

    loop = agent_loop(cpu_config, AutoTokenizer.from_pretrained(str(tiny_assets / "model")), ServerClient(None))
    with pytest.raises(ValueError, match=r"missing: \['session_id'\]"):
        asyncio.run(loop.run(dict(SAMPLING), raw_prompt=[{"role": "user", "content": "count 1"}], global_steps=1, index=0))


def test_each_turn_of_a_response_gets_its_own_seed():
    from verl_ext.seeded_agent_loop import SeedingServerClient

    class Recorder:
        def __init__(self):
            self.seeds = []

        async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
            self.seeds.append(sampling_params["seed"])

    recorder = Recorder()
    client = SeedingServerClient(recorder, run_seed=42, global_step=1, prompt_index=0, session=0)

    async def two_turns():
        await client.generate("r", prompt_ids=[1, 2], sampling_params={"temperature": 1.0})
        await client.generate("r", prompt_ids=[1, 2], sampling_params={"temperature": 1.0})

    asyncio.run(two_turns())
    assert recorder.seeds == [request_seed(42, 1, 0, [1, 2], 0, 0), request_seed(42, 1, 0, [1, 2], 0, 1)]
