"""The losses driven through verl's worker loss ``verl.workers.utils.losses.ppo_loss``.

The batch is shaped as the actor worker builds it: the model's log-probs over whole sequences
(prompt + response, unpadded), prompts/responses/attention_mask, and the global batch info
(dp_size, batch_num_tokens, global_batch_size) that makes the loss invariant to micro-batching.
"""

import pytest
import torch
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu
from verl.workers.utils.losses import ppo_loss

from tests.recipe_config import call_registered_loss, loss_config
from verl_ext.algorithms.registry import POLICY_LOSSES

PROMPT_LENGTH = 3


def worker_batch(seed=0, batch=6, max_response=9):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([9, 4, 1, 7, 9, 5][:batch])
    response_mask = (torch.arange(max_response)[None, :] < lengths[:, None]).float()
    old_log_prob = -torch.rand(batch, max_response, generator=generator) * 2 * response_mask
    response_log_prob = old_log_prob + (torch.rand(batch, max_response, generator=generator) - 0.5) * response_mask
    advantages = torch.tensor([0.5, -0.5, 1.0, -0.25, 0.0, 0.75])[:batch, None] * response_mask
    behaviour_ratio = torch.exp((torch.rand(batch, max_response, generator=generator) - 0.5) * 0.4) * response_mask
    return lengths, response_mask, old_log_prob, response_log_prob, advantages, behaviour_ratio


def model_output_and_data(rows, lengths, response_mask, old_log_prob, response_log_prob, advantages, behaviour_ratio, batch_info):
    """What ppo_loss receives in the worker: log-probs for every position of each unpadded sequence."""
    sequences = []
    for row in rows:
        values = torch.full((PROMPT_LENGTH + int(lengths[row]),), -7.0)  # prompt positions: ignored
        # log-prob of response token t is the output at position prompt_length + t - 1 (left shift)
        values[PROMPT_LENGTH - 1 : PROMPT_LENGTH - 1 + int(lengths[row])] = response_log_prob[row, : int(lengths[row])]
        sequences.append(values)
    flat = torch.cat(sequences).clone().requires_grad_(True)
    max_response = response_mask.shape[1]
    attention_mask = torch.cat([torch.ones(len(rows), PROMPT_LENGTH), response_mask[rows]], dim=1).long()
    data = TensorDict(
        {
            "prompts": torch.ones(len(rows), PROMPT_LENGTH, dtype=torch.long),
            "responses": torch.ones(len(rows), max_response, dtype=torch.long),
            "attention_mask": attention_mask,
            "response_mask": response_mask[rows],
            "old_log_probs": old_log_prob[rows],
            "advantages": advantages[rows],
            "rollout_is_weights": behaviour_ratio[rows],
        },
        batch_size=[len(rows)],
    )
    tu.assign_non_tensor(data, **batch_info)
    return {"log_probs": flat}, data, flat


def gradient_by_token(flat, rows, lengths, max_response):
    gradient = torch.zeros(len(rows), max_response)
    offset = 0
    for k, row in enumerate(rows):
        n = int(lengths[row])
        gradient[k, :n] = flat.grad[offset + PROMPT_LENGTH - 1 : offset + PROMPT_LENGTH - 1 + n]
        offset += PROMPT_LENGTH + n
    return gradient


def run_ppo_loss(loss_mode, rows, batch, batch_info, agg_mode="token-mean"):
    lengths, response_mask, old_log_prob, response_log_prob, advantages, behaviour_ratio = batch
    config = loss_config(loss_mode, f"actor_rollout_ref.actor.loss_agg_mode={agg_mode}", "actor_rollout_ref.actor.entropy_coeff=0")
    model_output, data, flat = model_output_and_data(
        rows, lengths, response_mask, old_log_prob, response_log_prob, advantages, behaviour_ratio, batch_info
    )
    if loss_mode != "offpolicy_grpo":
        data = data.exclude("rollout_is_weights")
    loss, metrics = ppo_loss(config, model_output, data)
    loss.backward()
    return loss, metrics, gradient_by_token(flat, rows, lengths, response_mask.shape[1])


def direct_loss(loss_mode, batch, agg_mode):
    """The same loss through verl's registry on the padded batch (one micro-batch, local normaliser)."""
    lengths, response_mask, old_log_prob, response_log_prob, advantages, behaviour_ratio = batch
    log_prob = response_log_prob.clone().requires_grad_(True)
    loss, _ = call_registered_loss(loss_mode, log_prob, old_log_prob, advantages, response_mask.bool(), agg_mode, behaviour_ratio=behaviour_ratio)
    loss.backward()
    return loss, log_prob.grad


# M2PO's mask comes from a statistic of the tokens the loss is called with (the second moment of their log-ratios,
# as in the paper's and AReaL's code), so it depends on how verl splits the batch: checked on its own below.
BATCH_STATISTIC_LOSSES = {"m2po"}


@pytest.mark.parametrize("agg_mode", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("loss_mode", sorted(set(POLICY_LOSSES) - BATCH_STATISTIC_LOSSES))
def test_micro_batches_add_up_to_the_whole_batch(loss_mode, agg_mode):
    """Two micro-batches with verl's global batch info give the loss and gradient of the whole batch."""
    batch = worker_batch(seed=1)
    response_mask = batch[1]
    global_info = dict(dp_size=1, batch_num_tokens=int(response_mask.sum()), global_batch_size=len(response_mask))
    whole_loss, whole_metrics, whole_gradient = run_ppo_loss(loss_mode, [0, 1, 2, 3, 4, 5], batch, global_info, agg_mode)
    first_loss, _, first_gradient = run_ppo_loss(loss_mode, [0, 1, 2], batch, global_info, agg_mode)
    second_loss, _, second_gradient = run_ppo_loss(loss_mode, [3, 4, 5], batch, global_info, agg_mode)
    torch.testing.assert_close(first_loss + second_loss, whole_loss, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(torch.cat([first_gradient, second_gradient]), whole_gradient, rtol=1e-5, atol=1e-7)

    direct, direct_gradient = direct_loss(loss_mode, batch, agg_mode)
    torch.testing.assert_close(whole_loss, direct, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(whole_gradient, direct_gradient, rtol=1e-5, atol=1e-7)
    assert "actor/ppo_kl" in whole_metrics and "actor/pg_loss" in whole_metrics


@pytest.mark.parametrize("agg_mode", ["token-mean", "seq-mean-token-mean"])
def test_m2po_masks_within_each_micro_batch_and_aggregates_with_the_global_normaliser(agg_mode):
    """Each micro-batch's loss is M2PO on that micro-batch's tokens alone (its own mask), scaled by verl's global
    normaliser; one micro-batch holding the whole batch is the loss called on the whole batch."""
    batch = worker_batch(seed=1)
    response_mask = batch[1]
    global_info = dict(dp_size=1, batch_num_tokens=int(response_mask.sum()), global_batch_size=len(response_mask))
    whole_loss, whole_metrics, whole_gradient = run_ppo_loss("m2po", [0, 1, 2, 3, 4, 5], batch, global_info, agg_mode)
    direct, direct_gradient = direct_loss("m2po", batch, agg_mode)
    torch.testing.assert_close(whole_loss, direct, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(whole_gradient, direct_gradient, rtol=1e-5, atol=1e-7)
    assert whole_metrics["actor/m2po_masked_fraction"].aggregate() > 0
    lengths, _, old_log_prob, response_log_prob, advantages, behaviour_ratio = batch
    split_gradient = []
    for rows in ([0, 1, 2], [3, 4, 5]):
        _, _, gradient = run_ppo_loss("m2po", rows, batch, global_info, agg_mode)
        part = (lengths[rows], response_mask[rows], old_log_prob[rows], response_log_prob[rows], advantages[rows], behaviour_ratio[rows])
        alone, alone_gradient = direct_loss("m2po", part, agg_mode)  # normalised by the part's own tokens/rows
        part_share = response_mask[rows].sum() / response_mask.sum() if agg_mode == "token-mean" else len(rows) / len(response_mask)
        torch.testing.assert_close(gradient, alone_gradient * part_share, rtol=1e-5, atol=1e-7)
        split_gradient.append(gradient)
    assert not torch.allclose(torch.cat(split_gradient), whole_gradient)  # the masks differ: the split matters


@pytest.mark.parametrize("agg_mode", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("loss_mode", sorted(set(POLICY_LOSSES) - BATCH_STATISTIC_LOSSES))
def test_data_parallel_ranks_add_up_to_the_whole_batch(loss_mode, agg_mode):
    """With dp_size=2 each rank's loss is scaled so that the averaged gradient equals the whole batch's: every
    loss, as the real loop at world size 2 needs (tests/staleness/test_e2e_cpu.py runs two of them there)."""
    batch = worker_batch(seed=2)
    response_mask = batch[1]
    tokens = int(response_mask.sum())
    whole_loss, _, whole_gradient = run_ppo_loss(
        loss_mode, [0, 1, 2, 3, 4, 5], batch, dict(dp_size=1, batch_num_tokens=tokens, global_batch_size=6), agg_mode
    )
    ranks = [run_ppo_loss(loss_mode, rows, batch, dict(dp_size=2, batch_num_tokens=tokens, global_batch_size=6), agg_mode)
             for rows in ([0, 1, 2], [3, 4, 5])]
    averaged_loss = (ranks[0][0] + ranks[1][0]) / 2  # DDP/FSDP average over ranks
    torch.testing.assert_close(averaged_loss, whole_loss, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(torch.cat([ranks[0][2], ranks[1][2]]) / 2, whole_gradient, rtol=1e-5, atol=1e-7)


def test_rec_loss_refuses_importance_weights_it_cannot_use():
    batch = worker_batch(seed=3)
    lengths, response_mask, old_log_prob, response_log_prob, advantages, behaviour_ratio = batch
    config = loss_config("rec_oneside_nois")
    model_output, data, _ = model_output_and_data(
        list(range(6)), lengths, response_mask, old_log_prob, response_log_prob, advantages, behaviour_ratio,
        dict(dp_size=1, batch_num_tokens=None, global_batch_size=None),
    )
    with pytest.raises(ValueError, match="bypass_mode=true"):
        ppo_loss(config, model_output, data)
