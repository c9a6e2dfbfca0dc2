"""Checkpoint-engine backend ``gloo`` (verl_ext/cpu_runtime/checkpoint_engine.py), with the real engine classes.

The calls are the ones verl's ``CheckpointEngineManager.update_weights`` makes (prepare, build_topology,
init_process_group, send_weights / receive_weights, finalize), each rank in its own thread; the failure tests put
one peer in a child process that dies in the middle of a transfer. The receiving end of the last tests is the
real chain of a CPU run: engine -> ``CPUServerAdapter`` -> ``CPURolloutServer`` (the Ray actor handle between
the last two is replaced by an in-process one).
"""

import asyncio
import multiprocessing
import os
import threading
from types import SimpleNamespace

import pytest
import torch

from verl_ext.cpu_runtime import checkpoint_engine
from verl_ext.cpu_runtime.checkpoint_engine import (
    BACKEND_NAME,
    WEIGHT_BYTES,
    TIMEOUT_KEY,
    GlooCheckpointEngine,
    WeightTransferError,
)

BUCKET = 4096  # bytes: several buckets per transfer, and tensors larger than a bucket
# a gloo timeout longer than any test's limit (pytest.ini): a wait that only the timeout could end fails the test there
BEYOND_THE_TESTS_LIMIT = 3600.0


def weights() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {
        "embed.weight": torch.randn(40, 33, generator=generator),  # 5280 bytes: split over two buckets
        "layer.0.weight": torch.randn(17, 9, generator=generator),
        "layer.0.bias": torch.randn(9, generator=generator).to(torch.bfloat16),
        "layer.0.scale": torch.tensor(0.5),  # a 0-d tensor
        "positions": torch.arange(300, dtype=torch.int64),
        "head.weight": torch.randn(700, generator=generator),
    }


def build_group(receivers: int, actor_ranks: int = 2, timeout: float = 20.0):
    """Engines for ``actor_ranks`` actor workers (rank 0 the sender) and ``receivers`` rollout workers, joined
    as verl's manager joins them: prepare on all, build_topology, init_process_group on all at once."""
    from verl.checkpoint_engine import CheckpointEngineRegistry

    actor = [CheckpointEngineRegistry.new(BACKEND_NAME, bucket_size=BUCKET, is_master=(rank == 0), timeout_seconds=timeout)
             for rank in range(actor_ranks)]
    rollout = [CheckpointEngineRegistry.new(BACKEND_NAME, bucket_size=BUCKET, timeout_seconds=timeout)
               for _ in range(receivers)]
    metadata = [engine.prepare() for engine in actor + rollout]
    actor_kwargs, rollout_kwargs = CheckpointEngineRegistry.get(BACKEND_NAME).build_topology(len(actor), len(rollout), metadata)
    joins = [
        threading.Thread(target=engine.init_process_group, kwargs={key: values[index] for key, values in kwargs.items()})
        for engines, kwargs in ((actor, actor_kwargs), (rollout, rollout_kwargs))
        for index, engine in enumerate(engines)
    ]
    for join in joins:
        join.start()
    for join in joins:
        join.join(timeout=timeout + 10)
    return actor, rollout


async def collect(engine, version) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() async for name, tensor in engine.receive_weights(global_steps=version)}


def run_transfer(actor, rollout, sent, version=3, expected_version=None):
    """Every rank's part of one push at once (actor ranks send or walk the generator, rollout ranks receive)."""
    walked = []

    def stream():
        for name, tensor in sent.items():
            walked.append(name)
            yield name, tensor

    async def everyone():
        return await asyncio.gather(
            *[engine.send_weights(stream(), global_steps=version) for engine in actor],
            *[collect(engine, version if expected_version is None else expected_version) for engine in rollout],
            return_exceptions=True,
        )

    results = asyncio.run(everyone())
    for engine in actor + rollout:
        engine.finalize()
    return results[: len(actor)], results[len(actor):], walked


def test_weights_arrive_bit_for_bit_through_verls_registry():
    sent = weights()
    actor, rollout = build_group(receivers=2)
    assert isinstance(actor[0], GlooCheckpointEngine)
    sender_results, received, walked = run_transfer(actor, rollout, sent)
    for copy in received:
        assert list(copy) == list(sent)  # the sender's order
        for name, tensor in sent.items():
            assert copy[name].dtype == tensor.dtype and copy[name].shape == tensor.shape
            assert torch.equal(copy[name], tensor), name
    metrics, not_in_group = sender_results
    assert metrics[WEIGHT_BYTES] == sum(t.numel() * t.element_size() for t in sent.values())
    assert metrics[checkpoint_engine.BUCKETS_SENT] >= 3
    # the actor rank outside the group walked the generator too (FSDP's full tensors are collective) and sent nothing
    assert not_in_group == {} and sorted(walked) == sorted(list(sent) * 2)


def test_a_damaged_transfer_is_refused_by_every_receiver(monkeypatch):
    actor, rollout = build_group(receivers=2, actor_ranks=1)
    original = GlooCheckpointEngine._broadcast

    async def flip_one_payload_byte(self, tensor, phase, version, moved):
        if self.rank == 0 and phase == "bucket payload" and moved == 0:
            tensor = tensor.clone()
            tensor[7] ^= 1  # one bit, on the wire only
        return await original(self, tensor, phase, version, moved)

    monkeypatch.setattr(GlooCheckpointEngine, "_broadcast", flip_one_payload_byte)
    _sender, received, _ = run_transfer(actor, rollout, weights())
    for error in received:
        assert isinstance(error, WeightTransferError)
        assert "arrived damaged" in str(error) and "checksum sent" in str(error)


def test_a_push_of_another_version_than_expected_is_refused():
    actor, rollout = build_group(receivers=1, actor_ranks=1)
    _sender, received, _ = run_transfer(actor, rollout, weights(), version=3, expected_version=4)
    assert isinstance(received[0], WeightTransferError)
    assert "the sender sent version 3, this receiver expected 4" in str(received[0])


def test_a_silent_peer_ends_the_wait_after_the_timeout():
    """The sender joined the group but never sends: the receiver gives up after timeout_seconds, naming the key."""
    actor, rollout = build_group(receivers=1, actor_ranks=1, timeout=1.0)
    with pytest.raises(WeightTransferError) as error:  # a wait without end fails at the test's limit (pytest.ini)
        asyncio.run(collect(rollout[0], 5))
    assert "bucket header failed for weight version 5 after 0 payload bytes" in str(error.value)
    assert TIMEOUT_KEY in str(error.value)
    for engine in actor + rollout:
        engine.finalize()


def test_a_sender_whose_weights_fail_midway_frees_the_receivers_at_once():
    """An error while producing the weights (FSDP's full tensors, say) ends the push on every rank right away,
    not after the receivers' timeout: the sender drops its group, closing its connections. The timeout is longer than
    the test's own limit, so only the closing can end the receiver's wait (else the test fails at its limit)."""
    actor, rollout = build_group(receivers=1, actor_ranks=1, timeout=BEYOND_THE_TESTS_LIMIT)

    def broken():
        yield from list(weights().items())[:3]
        raise RuntimeError("the actor could not gather its weights")

    async def everyone():
        return await asyncio.gather(actor[0].send_weights(broken(), global_steps=2), collect(rollout[0], 2),
                                    return_exceptions=True)

    sent, received = asyncio.run(everyone())
    assert isinstance(sent, RuntimeError) and "could not gather" in str(sent)
    assert isinstance(received, WeightTransferError) and "failed for weight version 2" in str(received)


def test_the_timeout_must_be_a_positive_number():
    with pytest.raises(ValueError, match="timeout_seconds must be a number > 0"):
        GlooCheckpointEngine(bucket_size=BUCKET, timeout_seconds=0)


# ---------------------------------------------------------------------------------------------------------
# a peer that dies in the middle of a transfer (child processes)
# ---------------------------------------------------------------------------------------------------------

DIE_AFTER_TENSORS = 3


def _sender_that_dies(rendezvous_queue, state: dict, version: int) -> None:
    """Child: actor rank 0; sends a few tensors, then the process ends without a word (a crashed trainer)."""
    engine = GlooCheckpointEngine(bucket_size=BUCKET, is_master=True, timeout_seconds=20)
    metadata = engine.prepare()
    rendezvous_queue.put(metadata.rendezvous)
    engine.init_process_group(rank=0, world_size=2, rendezvous=metadata.rendezvous)

    def stream():
        for index, item in enumerate(state.items()):
            if index == DIE_AFTER_TENSORS:
                os._exit(17)
            yield item

    asyncio.run(engine.send_weights(stream(), global_steps=version))


def _receiver_that_dies(rendezvous_queue, version: int) -> None:
    """Child: a rollout worker; takes the first tensor of the push, then the process ends (a crashed engine)."""
    engine = GlooCheckpointEngine(bucket_size=BUCKET, timeout_seconds=20)
    engine.init_process_group(rank=1, world_size=2, rendezvous=rendezvous_queue.get(timeout=120))

    async def take_one():
        async for _name, _tensor in engine.receive_weights(global_steps=version):
            os._exit(18)

    asyncio.run(take_one())


class InProcessActor:
    """Stands for the Ray handle of an actor living in this process: ``handle.method.remote(...)`` awaits it."""

    def __init__(self, target):
        self._target = target

    def __getattr__(self, name):
        method = getattr(self._target, name)

        async def call(*args, **kwargs):
            result = method(*args, **kwargs)
            return await result if asyncio.iscoroutine(result) else result

        return SimpleNamespace(remote=call)


@pytest.mark.timeout(300)  # two spawned processes import torch before the transfers begin
def test_a_peer_that_dies_mid_transfer_ends_the_push_with_an_error_and_no_new_version(tiny_assets, tmp_path):
    """Sender dies: the rollout worker's receive raises, the CPU rollout keeps no half-pushed version (it still
    reports the old one, and logs the aborted push). Receiver dies: the sender raises. Nothing waits for the
    timeout (20 s here): a dead peer closes its connections."""
    from verl.workers.config import HFModelConfig, RolloutConfig
    from verl.workers.rollout.replica import RolloutMode

    from verl_ext.rollout_events import read_rollout_events
    from verl_ext.cpu_runtime.rollout_server import CPURolloutServer
    from verl_ext.cpu_runtime.server_adapter import CPUServerAdapter

    rollout_config = RolloutConfig(
        name="cpu", tensor_model_parallel_size=1, dtype="float32", prompt_length=16, response_length=12,
        free_cache_engine=False, engine_kwargs={"cpu": {"event_log": str(tmp_path / "events.jsonl"), "batch_wait_seconds": 0.0}},
    )
    model_config = HFModelConfig(path=str(tiny_assets / "model"))
    server = CPURolloutServer(rollout_config, model_config, rollout_mode=RolloutMode.STANDALONE, replica_rank=0)
    adapter = CPUServerAdapter(config=rollout_config, model_config=model_config, replica_rank=0)
    adapter.server_handle = InProcessActor(server)
    state = {name: parameter.detach().clone() for name, parameter in server.model.named_parameters()}

    context = multiprocessing.get_context("spawn")
    to_receiver, to_dying_receiver = context.Queue(), context.Queue()
    dying_sender = context.Process(target=_sender_that_dies, args=(to_receiver, state, 1))
    dying_receiver = context.Process(target=_receiver_that_dies, args=(to_dying_receiver, 1))
    dying_sender.start()
    dying_receiver.start()
    try:
        # 1. the engine gets version 0 through a clean push (the adapter's own path, no checkpoint engine)
        asyncio.run(adapter.update_weights(iter(state.items()), global_steps=0))
        assert server.weight_state()["weight_version"] == 0

        # 2. the sender dies after a few tensors: this rollout worker's push fails, naming what happened
        # (each wait's timeout is longer than the test's limit: only the dead peer's closed connection ends it)
        receiver = GlooCheckpointEngine(bucket_size=BUCKET, timeout_seconds=BEYOND_THE_TESTS_LIMIT)
        receiver.init_process_group(rank=1, world_size=2, rendezvous=to_receiver.get(timeout=120))
        with pytest.raises(WeightTransferError, match=r"rank 1/2 \(receiver\): bucket .* failed for weight version 1"):
            asyncio.run(adapter.update_weights(receiver.receive_weights(global_steps=1), global_steps=1))
        dying_sender.join(timeout=30)
        assert dying_sender.exitcode == 17
        assert server.weight_state()["weight_version"] == 0  # no new version claimed
        aborted = [event for event in read_rollout_events(tmp_path / "events.jsonl") if event["event"] == "update_aborted"]
        assert len(aborted) == 1 and "WeightTransferError" in aborted[0]["reason"]

        # 3. the receiver dies after the first tensor: the sender's push fails
        sender = GlooCheckpointEngine(bucket_size=BUCKET, is_master=True, timeout_seconds=BEYOND_THE_TESTS_LIMIT)
        metadata = sender.prepare()
        to_dying_receiver.put(metadata.rendezvous)
        sender.init_process_group(rank=0, world_size=2, rendezvous=metadata.rendezvous)
        many = {f"w{index}": torch.randn(512) for index in range(64)}  # 128 KiB: far more than one bucket
        with pytest.raises(WeightTransferError, match=r"rank 0/2 \(sender\): bucket .* failed for weight version 1"):
            asyncio.run(sender.send_weights(iter(many.items()), global_steps=1))
        dying_receiver.join(timeout=30)
        assert dying_receiver.exitcode == 18
    finally:
        for child in (dying_sender, dying_receiver):
            if child.is_alive():
                child.kill()


def test_a_push_that_loaded_part_of_the_weights_leaves_the_engine_unusable(tiny_assets, tmp_path):
    """What the adapter's abort does when buckets already reached the server: the weights mix two versions, so
    generating is refused until a complete push."""
    from tests.cpu.test_rollout_server import SAMPLING, make_server, prompt_ids, push, trainer_weights

    from verl_ext.cpu_runtime.rollout_server import RolloutWeightsUnavailable

    async def scenario():
        server = make_server(tiny_assets, tmp_path, free_cache_engine=False, mode="standalone")
        _, state = trainer_weights(tiny_assets)
        await push(server, state, version=0)
        _, trained = trainer_weights(tiny_assets, seed=1)
        await server.begin_weight_update()
        await server.load_weight_bucket(list(trained.items())[:2])
        record = await server.abort_weight_update(reason="WeightTransferError: the sender died")
        assert record["tensors_loaded"] == 2 and server.weight_state()["weights"] == "incomplete"
        with pytest.raises(RolloutWeightsUnavailable, match="failed part-way"):
            await server.generate(prompt_ids(tiny_assets), dict(SAMPLING), "r0")
        await push(server, trained, version=1)  # a complete push makes it usable again
        output = await server.generate(prompt_ids(tiny_assets), dict(SAMPLING), "r1")
        assert output.extra_fields["global_steps"] == 1

    asyncio.run(scenario())
