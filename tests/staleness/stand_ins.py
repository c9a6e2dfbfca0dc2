"""Stand-ins for the GPU-only collaborators of verl's v1 trainer, to run its real ``fit`` loop on a CPU.

Replaced: the FSDP actor worker group, the colocated vLLM rollout with its checkpoint-engine manager, the
agent loop that drives it, the reward loop's workers and the GPU resource pool. Real: verl's trainer loop,
TransferQueue, replay buffer, dataloader, advantage estimator and metrics, and the delayed_sync trainer.

The toy policy: at weight version v every response token has log-probability ``log_prob_at(v)`` =
-0.1 (v + 1), so behaviour-minus-current log-prob on a batch of lag k is exactly 0.1 k. The actor's
version is the number of updates it made; the rollout holds the version of its last push and, like
colocated vLLM (sleep level 2), nothing after ``sleep``: generating then raises.
"""

import json
import os
import queue
import threading
import time

import torch
import transfer_queue as tq
from tensordict import TensorDict
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

from verl_ext.staleness.pending_batches import STEP_TAG

RESPONSE_LENGTH = 3
PROMPT_IDS = [4, 6, 10, 2, 7]


def log_prob_at(version: int) -> float:
    return -0.1 * (version + 1)


def nested(rows: list[torch.Tensor]) -> torch.Tensor:
    return torch.nested.as_nested_tensor(rows, layout=torch.jagged)


class SimulatedCrash(RuntimeError):
    pass


class StandInActor:
    """The actor worker group: ``update_actor`` advances the weight version, checkpoints save it."""

    def __init__(self, crash_at_update: int | None = None, seconds_per_update: float = 0.0):
        self.version = 0
        self.seconds_per_update = seconds_per_update  # how long an update "trains" (overlap tests)
        self._dispatch_info = {"actor": [0]}
        self.crash_at_update = crash_at_update  # simulate a crash: raise instead of this (0-based) update
        self.current_step = lambda: None  # set by the harness: the trainer's 0-based training step
        self.trained_steps: list[int] = []  # per update: the training step it belongs to
        self.pi_old_seen: list[float] = []  # per update: the mean pi_old log-prob the loss received
        self.trained_uids: list[set[str]] = []  # per update: the prompt groups trained on (padding excluded)
        self.trained_indices: list[list[int]] = []  # per update: the dataset indices of those prompts
        self.padding_rows: list[int] = []  # per update: verl's synthetic padding samples in the batch
        # per update, per mini-batch: the loss normaliser verl's engine computes (sum of loss_mask, dp=1)
        self.mini_batch_token_counts: list[list[int]] = []
        self.padding_advantages: list[float] = []  # per update: the largest |advantage| on a padding row
        self.forward_passes = 0  # compute_log_prob calls (a forward pass over a batch)
        self.measured_updates = 0  # updates that measured the log-prob mismatch in their own forward pass

    def update_actor(self, batch):
        if self.crash_at_update is not None and len(self.pi_old_seen) == self.crash_at_update:
            raise SimulatedCrash(f"stand-in actor: simulated crash at update {self.crash_at_update}")
        self.trained_steps.append(self.current_step())
        time.sleep(self.seconds_per_update)
        padding = [bool(tag.get("is_padding", False)) for tag in batch.tags]
        real_keys = [key for key, is_padding in zip(batch.keys, padding) if not is_padding]
        self.trained_uids.append({key.split("_", 1)[0] for key in real_keys})
        self.padding_rows.append(sum(padding))
        indices = tq.kv_batch_get(keys=real_keys, partition_id=batch.partition_id, select_fields=["index"])["index"]
        self.trained_indices.append(sorted({int(index) for index in indices}))
        self._split_like_verls_worker(batch, padding)
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["old_log_probs", "response_mask"]
        ).to_padded_tensor()
        mask = data["response_mask"].bool()
        self.pi_old_seen.append(float(data["old_log_probs"][mask].mean()))
        metrics = {"mfu": [0.0], "pg_loss": [0.0], "grad_norm": [1.0], **self._measured_in_the_update(batch)}
        self.version += 1
        return {"metrics": metrics}

    def _measured_in_the_update(self, batch) -> dict:
        """What verl's worker returns from a batch the trainer marked for the mismatch measurement: the batch as
        one micro-batch of one mini-batch, the loss wrapped in verl-ext's MismatchMeasuringLoss (the real one),
        its Metric values reduced as verl's train_mini_batch reduces them, before the update changes the version."""
        from verl.utils.metric import Metric

        from verl_ext.staleness.mismatch_in_update import UPDATE_KEY, MismatchMeasuringLoss

        if UPDATE_KEY not in batch.extra_info:
            return {}
        self.measured_updates += 1
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=["prompts", "responses", "old_log_probs", "response_mask"])
        lengths = (data["prompts"].offsets().diff() + data["responses"].offsets().diff()).tolist()
        log_probs = nested([torch.full((length,), log_prob_at(self.version)) for length in lengths])
        _loss, metrics = MismatchMeasuringLoss(lambda **_: (torch.tensor(0.0), {}))(
            model_output={"log_probs": log_probs}, data=data)
        return {key: [Metric.aggregate_dp([value])] for key, value in metrics.items()}

    def _split_like_verls_worker(self, batch, padding):
        """What verl's actor worker does with the batch before the loss, on one data-parallel rank: split it
        into mini-batches of ``mini_batch_size`` (verl's ``make_iterator``, as ``train_mini_batch``) and take
        each mini-batch's ``loss_mask`` sum as the token-mean normaliser (the engines' ``batch_num_tokens``)."""
        from verl.utils import tensordict_utils as tu

        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["loss_mask", "advantages"]
        )
        advantages = data["advantages"].to_padded_tensor(padding=0.0).abs().amax(dim=-1)
        flags = torch.tensor(padding, dtype=torch.bool)
        self.padding_advantages.append(float(advantages[flags].max()) if flags.any() else 0.0)
        info = batch.extra_info
        mini_batches = tu.make_iterator(
            data.select("loss_mask"),
            mini_batch_size=info["mini_batch_size"],
            epochs=info["epochs"],
            seed=info["seed"],
            dataloader_kwargs=dict(info["dataloader_kwargs"]),
        )
        self.mini_batch_token_counts.append([int(mini_batch["loss_mask"].values().sum()) for mini_batch in mini_batches])

    def compute_log_prob(self, batch):
        self.forward_passes += 1
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["input_ids"])
        lengths = data["input_ids"].offsets().diff().tolist()
        values = [torch.full((length,), log_prob_at(self.version)) for length in lengths]
        fields = TensorDict(
            {"log_probs": nested(values), "entropy": nested([value * 0 for value in values])}, batch_size=len(values)
        )
        tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=fields)
        return batch

    def save_checkpoint(self, local_path, remote_path=None, global_steps=None, max_ckpt_to_keep=None):
        os.makedirs(local_path, exist_ok=True)
        with open(os.path.join(local_path, "version.json"), "w") as file:
            json.dump({"version": self.version}, file)

    def load_checkpoint(self, local_path, del_local_after_load=False):
        with open(os.path.join(local_path, "version.json")) as file:
            self.version = json.load(file)["version"]


class StandInRollout:
    """The colocated rollout engine: holds the weights of its last push until it sleeps.

    ``resident`` (``free_cache_engine=false``): sleep keeps the weights, as verl's engines do then. A push
    while prompt groups are queued or generating (``generating`` > 0, counted by the background agent loop)
    raises: it would change the weights under a batch of the previous version.
    """

    def __init__(self, actor: StandInActor, resident: bool = False):
        self.actor = actor
        self.resident = resident
        self.generating = 0
        self.lock = threading.Lock()
        self.weights: int | None = None  # the actor version it holds; None: discarded by sleep
        self.label: int | None = None  # the global_steps of the last push (vLLM stamps outputs with it)
        self.pushes: list[dict] = []  # {"label", "weights", "served"}: one per update_weights
        self.served_since_push = 0

    def push(self, label):
        with self.lock:
            if self.generating:
                raise RuntimeError(f"stand-in rollout: weight push {label} while {self.generating} prompt groups generate")
        self.weights, self.label = self.actor.version, label
        self.pushes.append({"label": label, "weights": self.actor.version})
        self.served_since_push = 0

    def sleep(self):
        if not self.resident:
            self.weights = None

    def require_weights(self):
        if self.weights is None:
            raise RuntimeError("stand-in rollout: generate() while asleep, its weights were discarded by sleep")


class StandInCheckpointManager:
    """verl's CheckpointEngineManager with the naive backend: update_weights wakes and pushes, sleep discards."""

    def __init__(self, rollout: StandInRollout):
        self.rollout = rollout

    def update_weights(self, global_steps=None):
        self.rollout.push(global_steps)
        return {}

    def sleep_replicas(self):
        self.rollout.sleep()


def session_reward(step: int | None, index: int, session: int) -> float:
    """The default reward of response ``session`` to the prompt of dataset ``index``: 0, 1, ... in every group
    (no group has zero variance)."""
    return float(session)


class StandInAgentLoop:
    """The agent loop manager: writes ``rollout.n`` trajectories per prompt to TransferQueue, as verl's does.

    Rewards are computed here, at sampling time (verl's streaming rule-based reward): ``reward(step, index,
    session)`` is the reward of response ``session`` to the prompt of dataset ``index`` generated for
    training step ``step`` (the trainer's tag; None for validation), put on the response's last token.
    """

    def __init__(self, rollout: StandInRollout, n: int, reward=session_reward, trained_tokens=None):
        self.rollout = rollout
        self.n = n
        self.reward = reward
        # trained_tokens(index, session): how many of the response's tokens the loss trains (response_mask 1, the
        # others 0, as a tool's output in a multi-turn response); None: all of them
        self.trained_tokens = trained_tokens
        # per prompt group: {"uid", "index", "step", "partition", "weights", "label", "global_steps"}
        self.generated: list[dict] = []

    def generate_sequences(self, batch: TensorDict) -> None:
        for row in range(len(batch)):
            self._generate_group(batch, row)

    def _generate_group(self, batch: TensorDict, row: int) -> None:
        validate = bool(batch["validate"]) if "validate" in batch.keys() else False
        partition = "val" if validate else "train"
        self.rollout.require_weights()
        weights, label = self.rollout.weights, self.rollout.label  # what generates this whole group
        n = 1 if validate else self.n
        uid = str(batch["uid"][row])
        index = int(batch["index"][row])
        global_steps = int(batch["global_steps"]) if "global_steps" in batch.keys() else 0
        step = None if validate else (tq.kv_list(partition) or {}).get(partition, {}).get(uid, {}).get(STEP_TAG)
        tq.kv_put(key=uid, partition_id=partition, tag={"status": "running"})
        for session in range(n):
            prompts = torch.tensor(PROMPT_IDS, dtype=torch.int64)
            responses = torch.tensor([8 + session] * RESPONSE_LENGTH, dtype=torch.int64)
            input_ids = torch.cat([prompts, responses])
            rm_scores = torch.zeros(RESPONSE_LENGTH)
            rm_scores[-1] = self.reward(step, index, session)
            trained = RESPONSE_LENGTH if self.trained_tokens is None else self.trained_tokens(index, session)
            mask = (torch.arange(RESPONSE_LENGTH) < trained).to(torch.int64)
            trajectory = {
                "prompts": prompts,
                "responses": responses,
                "response_mask": mask,
                "loss_mask": mask,  # verl's agent loop: = response_mask
                "rollout_log_probs": torch.full((RESPONSE_LENGTH,), log_prob_at(weights)),
                "rm_scores": rm_scores,
                "input_ids": input_ids,
                "attention_mask": torch.ones_like(input_ids),
                "position_ids": torch.arange(len(input_ids)),
                "num_turns": 2,
                "uid": uid,
                "index": index,
                "data_source": str(batch["data_source"][row]),
                "reward_model": batch["reward_model"][row],
                "extra_fields": {"global_steps": label},
            }
            tag = {
                "status": "success",
                "prompt_len": len(PROMPT_IDS),
                "response_len": RESPONSE_LENGTH,
                "seq_len": len(input_ids),
                "global_steps": global_steps,
                "min_global_steps": label,
                "max_global_steps": label,
            }
            # one put per trajectory, as verl's AgentLoopWorkerTQ._agent_loop_postprocess does
            tq.kv_batch_put(
                keys=[f"{uid}_{session}_0"],
                partition_id=partition,
                fields=list_of_dict_to_tensordict([trajectory]),
                tags=[tag],
            )
        self.rollout.served_since_push += n
        self.generated.append(
            {"uid": uid, "index": index, "step": step, "partition": partition, "weights": weights, "label": label,
             "global_steps": global_steps}
        )
        self._group_done()
        tq.kv_put(key=uid, partition_id=partition, tag={"status": "finished"})

    def _group_done(self) -> None:
        """Called when a group's trajectories are written, right before its status says so."""


class BackgroundAgentLoop(StandInAgentLoop):
    """The agent loop as verl's really runs: ``generate_sequences`` returns at once, and the prompt groups
    are generated one after another by a background thread, ``seconds_per_group`` each, with the weights
    the rollout holds when each is generated (so a push in the middle would show in ``generated``, and the
    rollout refuses it). An error is kept in ``errors`` and the group marked failed, so the trainer goes on
    and the test sees it."""

    def __init__(self, rollout: StandInRollout, n: int, reward=session_reward, seconds_per_group: float = 0.02,
                 trained_tokens=None):
        super().__init__(rollout, n, reward, trained_tokens)
        self.seconds_per_group = seconds_per_group
        self.errors: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def generate_sequences(self, batch: TensorDict) -> None:
        with self.rollout.lock:
            self.rollout.generating += len(batch)
        for row in range(len(batch)):
            self._queue.put((batch, row))

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            batch, row = item
            time.sleep(self.seconds_per_group)
            try:
                self._generate_group(batch, row)
            except Exception as error:  # noqa: BLE001 -- reported through self.errors
                self.errors.append(repr(error))
                self._group_done()
                partition = "val" if "validate" in batch.keys() and bool(batch["validate"]) else "train"
                tq.kv_put(key=str(batch["uid"][row]), partition_id=partition, tag={"status": "failure"})

    def _group_done(self) -> None:
        with self.rollout.lock:
            self.rollout.generating -= 1

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)


class StandInRewardLoop:
    """Rewards are computed by the agent loop (rule reward): verl skips its colocated reward model path."""

    reward_loop_worker_handles = ["stand-in reward worker"]


class StandInResourcePool:
    def get_n_gpus(self) -> int:
        return 1
