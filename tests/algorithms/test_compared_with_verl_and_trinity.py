"""The claims of docs/algorithms.md, "Compared with Trinity-RFT and with verl", each computed both ways.

- OPMD's two regularizer forms against their formulas (value and gradient, float64, random batches);
- verl 0.9.1's ``dro`` equals OPMD with ``reg_form=token`` (``dro_beta`` = ``reg_coef``) in gradient, not the
  paper's sequence form; verl's ``vanilla`` equals REC-OneSide-IS in gradient while no ratio reaches the
  dual-clip constant ``clip_ratio_c``, and differs beyond it;
- Trinity-RFT's k2 regularizer c (log pi - log pi_old)^2 is ``reg_form=token`` with ``reg_coef`` = 2c;
- RED-Drop counts a reward equal to its group mean as neither positive nor negative (Trinity-RFT counts it
  positive): the two conventions differ only when a non-binary reward sits exactly on the mean;
- Trinity-RFT's ``topr`` (a per-token ratio truncated to [0, 1] where A <= 0, -sg(alpha) A log pi, token mean)
  is ``topr`` with ``topr_ratio_level=token`` in gradient, not the paper's sequence ratio;
- AReaL's ``m2_threshold`` mask (every token of the micro-batch sorted by squared log-ratio, the largest masked
  until the mean of the rest is below the threshold, at least one kept) is ``m2po`` with ``m2_tokens=all``.

verl's losses are called from verl's own registry; the Trinity-RFT and paper formulas are written out here.
"""

import itertools

import pytest
import torch
from verl.trainer.ppo.core_algos import get_policy_loss_fn

from tests.recipe_config import actor_config, call_registered_loss, compose_recipe, loss_config
from verl_ext.algorithms.loss_config import RECPolicyLossConfig
from verl_ext.algorithms.opmd import opmd_loss
from verl_ext.algorithms.red_drop import red_drop_advantages
from verl_ext.config_values import ConfigError

BETA = 0.2
REG_FORM = "actor_rollout_ref.actor.policy_loss.reg_form"
REG_COEF = f"actor_rollout_ref.actor.policy_loss.reg_coef={BETA}"


def random_batch(seed: int, rows: int = 6, length: int = 12, spread: float = 0.8):
    """float64 log-probs with ratios exp(+-spread), responses of random lengths (one may be empty), A per response."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, length + 1, (rows,), generator=generator)
    lengths[0] = length
    response_mask = torch.arange(length)[None, :] < lengths[:, None]
    old_log_prob = -torch.rand(rows, length, generator=generator, dtype=torch.float64) * 3
    log_prob = old_log_prob + (torch.rand(rows, length, generator=generator, dtype=torch.float64) * 2 - 1) * spread
    advantages = (torch.randn(rows, 1, generator=generator, dtype=torch.float64) * response_mask).clone()
    return log_prob, old_log_prob, advantages, response_mask


def gradient_of(loss_fn, log_prob):
    log_prob = log_prob.clone().requires_grad_(True)
    loss = loss_fn(log_prob)
    loss.backward()
    return loss.detach(), log_prob.grad


def opmd_formula(form, log_prob, old_log_prob, advantages, response_mask):
    """The objective summed over responses (token-sum): sum_i [-A_i log pi(y_i) + regularizer_i]."""
    mask = response_mask.to(log_prob.dtype)
    delta = (log_prob - old_log_prob) * mask
    policy = -(advantages * delta).sum()
    if form == "sequence":
        return policy + (BETA / 2) * (delta.sum(dim=-1) ** 2).sum()
    return policy + (BETA / 2) * (delta**2).sum()


@pytest.mark.parametrize("form", ["sequence", "token"])
@pytest.mark.parametrize("seed", range(3))
def test_opmd_forms_match_their_formulas_in_value_and_gradient(form, seed):
    log_prob, old_log_prob, advantages, response_mask = random_batch(seed)
    expected_value, expected_gradient = gradient_of(lambda lp: opmd_formula(form, lp, old_log_prob, advantages, response_mask), log_prob)
    # the pure loss: its matrix summed is the objective
    value, gradient = gradient_of(
        lambda lp: opmd_loss(lp, old_log_prob, advantages, response_mask, reg_coef=BETA, reg_form=form).loss_matrix.sum(), log_prob
    )
    torch.testing.assert_close(value, expected_value, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gradient, expected_gradient, rtol=1e-12, atol=1e-12)
    # the registered loss, with the key, through verl's agg_loss (token-sum)
    config = loss_config("opmd", REG_COEF, f"{REG_FORM}={form}")
    value, gradient = gradient_of(
        lambda lp: call_registered_loss("opmd", lp, old_log_prob, advantages, response_mask, "token-sum", config)[0], log_prob
    )
    torch.testing.assert_close(value, expected_value, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gradient, expected_gradient, rtol=1e-12, atol=1e-12)


def test_opmd_forms_differ_by_the_response_length():
    """Equal per-token log-ratios delta on n tokens: the sequence form's regularizer gradient is beta*n*delta per
    token, the token form's beta*delta (the n-fold gap behind the ~190x seen on 1,024-token responses)."""
    n, delta = 64, 0.01
    old_log_prob = torch.full((1, n), -1.0, dtype=torch.float64)
    log_prob = old_log_prob + delta
    zero, mask = torch.zeros(1, n, dtype=torch.float64), torch.ones(1, n, dtype=torch.bool)
    gradients = {
        form: gradient_of(lambda lp: opmd_loss(lp, old_log_prob, zero, mask, reg_coef=BETA, reg_form=form).loss_matrix.sum(), log_prob)[1]
        for form in ("sequence", "token")
    }
    torch.testing.assert_close(gradients["sequence"], torch.full((1, n), BETA * n * delta, dtype=torch.float64))
    torch.testing.assert_close(gradients["token"], torch.full((1, n), BETA * delta, dtype=torch.float64))


@pytest.mark.parametrize("agg_mode", ["token-mean", "seq-mean-token-mean"])
def test_verl_dro_is_opmd_token_form_in_gradient(agg_mode):
    log_prob, old_log_prob, advantages, response_mask = random_batch(seed=11)
    dro_config = actor_config("actor_rollout_ref.actor.policy_loss.loss_mode=dro", f"actor_rollout_ref.actor.policy_loss.dro_beta={BETA}")
    dro_value, dro_gradient = gradient_of(
        lambda lp: get_policy_loss_fn("dro")(
            old_log_prob=old_log_prob, log_prob=lp, advantages=advantages, response_mask=response_mask,
            loss_agg_mode=agg_mode, config=dro_config,
        )[0],
        log_prob,
    )
    ours = {}
    for form in ("token", "sequence"):
        config = loss_config("opmd", REG_COEF, f"{REG_FORM}={form}")
        ours[form] = gradient_of(
            lambda lp: call_registered_loss("opmd", lp, old_log_prob, advantages, response_mask, agg_mode, config)[0], log_prob
        )
    torch.testing.assert_close(ours["token"][1], dro_gradient, rtol=1e-10, atol=1e-12)
    assert not torch.allclose(ours["sequence"][1], dro_gradient, rtol=1e-3, atol=1e-6)
    # the values differ by a constant: dro writes -A log pi where verl-ext writes -A (log pi - log pi_old)
    mask = response_mask.to(torch.float64)
    if agg_mode == "token-mean":
        constant = -(advantages * old_log_prob * mask).sum() / mask.sum()
    else:
        rows = mask.sum(-1) > 0
        constant = (-(advantages * old_log_prob * mask).sum(-1)[rows] / mask.sum(-1)[rows]).mean()
    torch.testing.assert_close(dro_value - ours["token"][0], constant, rtol=1e-10, atol=1e-12)


def test_trinity_k2_coefficient_is_half_of_beta():
    """Trinity-RFT's REC loss with its k2 regularizer, per token -A log pi + c (log pi - log pi_old)^2 under a
    token mean, has the gradient of reg_form=token with reg_coef = 2c (its c = 0.1 is beta = 0.2 here)."""
    c = BETA / 2
    log_prob, old_log_prob, advantages, response_mask = random_batch(seed=12)
    mask = response_mask.to(torch.float64)

    def trinity(lp):
        per_token = -advantages * lp + c * (lp - old_log_prob) ** 2
        return (per_token * mask).sum() / mask.sum()

    _, expected = gradient_of(trinity, log_prob)
    config = loss_config("opmd", REG_COEF, f"{REG_FORM}=token")
    _, gradient = gradient_of(lambda lp: call_registered_loss("opmd", lp, old_log_prob, advantages, response_mask, "token-mean", config)[0], log_prob)
    torch.testing.assert_close(gradient, expected, rtol=1e-10, atol=1e-12)


def test_reg_form_is_checked_naming_key_and_values():
    """The checks verl runs when it builds the policy-loss config (driver and workers), called directly."""
    with pytest.raises(ConfigError, match=r"policy_loss\.reg_form='squared' is invalid: allowed values are one of \['sequence', 'token'\]"):
        RECPolicyLossConfig(loss_mode="opmd", reg_form="squared")
    # a non-default form where no loss reads it would be accepted and ignored: refused instead
    with pytest.raises(ConfigError, match=r"reg_form='token'.*Only \['opmd'\] read it"):
        RECPolicyLossConfig(loss_mode="rec_oneside_nois", reg_form="token")
    assert RECPolicyLossConfig(loss_mode="opmd", reg_form="token").reg_form == "token"


def ratios_batch(dual_clip_ratio: float | None):
    """Tokens in every region of the one-side mask, A of both signs; optionally one A<0 token at a ratio above
    ``dual_clip_ratio`` (where verl's dual clip acts)."""
    log_prob, old_log_prob, advantages, response_mask = random_batch(seed=13, spread=1.0)
    if dual_clip_ratio is not None:
        row = int(torch.nonzero((advantages[:, 0] < 0) & response_mask[:, 0])[0])
        log_prob[row, 0] = old_log_prob[row, 0] + torch.log(torch.tensor(dual_clip_ratio * 1.5, dtype=torch.float64))
    return log_prob, old_log_prob, advantages, response_mask


def vanilla_and_oneside_is(batch, *overrides):
    """Gradients of verl's ``vanilla`` and of ``rec_oneside_is``, both given the actor config verl builds for
    ``rec_oneside_is`` (vanilla reads only the epsilons, ``clip_ratio_c`` and the batch info from it)."""
    log_prob, old_log_prob, advantages, response_mask = batch
    config = loss_config("rec_oneside_is", *overrides)
    _, vanilla = gradient_of(
        lambda lp: get_policy_loss_fn("vanilla")(
            old_log_prob=old_log_prob, log_prob=lp, advantages=advantages, response_mask=response_mask,
            loss_agg_mode="token-mean", config=config,
        )[0],
        log_prob,
    )
    config = loss_config("rec_oneside_is", *overrides)
    _, ours = gradient_of(lambda lp: call_registered_loss("rec_oneside_is", lp, old_log_prob, advantages, response_mask, "token-mean", config)[0], log_prob)
    return vanilla, ours


def test_verl_vanilla_without_dual_clip_is_rec_oneside_is_in_gradient():
    batch = ratios_batch(dual_clip_ratio=None)
    log_prob, old_log_prob, advantages, response_mask = batch
    ratio = torch.exp(log_prob - old_log_prob)[response_mask]
    sign = advantages[response_mask]
    # the batch has tokens kept and masked on both sides (recipe epsilons 0.2, 0.2), every ratio below clip_ratio_c=3
    assert ((sign > 0) & (ratio > 1.2)).any() and ((sign < 0) & (ratio < 0.8)).any() and ratio.max() < 3
    vanilla, ours = vanilla_and_oneside_is(batch)
    torch.testing.assert_close(vanilla, ours, rtol=1e-10, atol=1e-12)

    # a negative-advantage token at a ratio above clip_ratio_c: dual clip drops its gradient, REC-OneSide-IS keeps it
    batch = ratios_batch(dual_clip_ratio=3.0)
    vanilla, ours = vanilla_and_oneside_is(batch)
    differs = ~torch.isclose(vanilla, ours, rtol=1e-10, atol=1e-12)
    assert differs.sum() == 1 and vanilla[differs].item() == 0
    # ... unless clip_ratio_c lies above every ratio
    vanilla, ours = vanilla_and_oneside_is(batch, "actor_rollout_ref.actor.clip_ratio_c=100")
    torch.testing.assert_close(vanilla, ours, rtol=1e-10, atol=1e-12)


def trinity_drop_count(rewards):
    """Trinity-RFT's convention: a reward >= the group mean counts as positive; excess negatives are dropped."""
    mean = sum(rewards) / len(rewards)
    positives = sum(r >= mean for r in rewards)
    return max(0, (len(rewards) - positives) - positives)


def dropped_by_us(rewards):
    result = red_drop_advantages(torch.tensor(rewards, dtype=torch.float64), ["g"] * len(rewards), torch.Generator().manual_seed(0))
    return int((~result.kept).sum()), result


def test_red_drop_reward_on_the_group_mean_is_neither_positive_nor_negative():
    rewards = [1.0, 0.5, 0.25, 0.25, 0.5]  # mean 0.5: one positive, two negatives, two on the mean
    dropped, result = dropped_by_us(rewards)
    assert dropped == 1  # balanced against the one strict positive
    assert trinity_drop_count(rewards) == 0  # Trinity: three positives (1.0 and both 0.5s) outnumber two negatives
    assert result.kept[[0, 1, 4]].all()  # the responses on the mean are never dropped...
    kept_mean = (1.0 + 0.5 + 0.5 + 0.25) / 4
    torch.testing.assert_close(result.advantages[[1, 4]], torch.full((2,), 0.5 - kept_mean, dtype=torch.float64))  # ...and re-centred


def test_red_drop_conventions_agree_on_binary_rewards():
    """With 0/1 rewards a reward equals its group mean only in an all-equal group, so both conventions drop alike."""
    for size in range(1, 9):
        for rewards in itertools.product((0.0, 1.0), repeat=size):
            assert dropped_by_us(list(rewards))[0] == trinity_drop_count(rewards), rewards


def test_a_clipping_range_added_to_the_policy_loss_node_is_refused_in_the_driver_naming_the_real_key():
    """``policy_loss.clip_ratio_low`` looks like epsilon_low, which is ``actor.clip_ratio_low``: no loss reads it.
    (The node keeps no copy of it: without ``+`` Hydra refuses the key; with ``+`` the driver does.)"""
    from omegaconf import OmegaConf

    from verl_ext.driver_checks import check_run_config

    config = compose_recipe()
    check_run_config(config)
    # what the override +actor_rollout_ref.actor.policy_loss.clip_ratio_low=0.3 does
    OmegaConf.update(config, "actor_rollout_ref.actor.policy_loss.clip_ratio_low", 0.3, force_add=True)
    with pytest.raises(ConfigError, match=r"policy_loss\.clip_ratio_low=0\.3 is invalid.*set actor_rollout_ref\.actor\.clip_ratio_low instead"):
        check_run_config(config)


def test_rec_estimator_is_verls_grpo_without_std_except_for_groups_of_one():
    import numpy as np
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_adv_estimator_fn

    rewards = torch.tensor([1.0, 0.0, 0.5, 0.2, 0.9, 0.7])
    index = np.array(["a", "a", "a", "b", "b", "solo"], dtype=object)
    response_mask = torch.ones(len(rewards), 3)
    token_level_rewards = torch.zeros(len(rewards), 3)
    token_level_rewards[:, -1] = rewards
    ours, _ = get_adv_estimator_fn("rec")(token_level_rewards=token_level_rewards, response_mask=response_mask, index=index, config=None)
    verls, _ = compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, norm_adv_by_std_in_grpo=False)
    torch.testing.assert_close(ours[:5], verls[:5])
    # a group of one: verl's baseline is 0 (A = r), verl-ext's is the response's own reward (A = 0)
    assert ours[5].abs().max() == 0 and torch.allclose(verls[5], torch.full((3,), 0.7))


def trinity_topr(log_prob, old_log_prob, advantages, response_mask):
    """Trinity-RFT's topr as its formula reads: alpha = [pi/mu]_0^1 per token where A <= 0, else 1; loss = token
    mean of -sg(alpha) A log pi."""
    ratio = torch.exp(log_prob - old_log_prob)
    alpha = torch.where(advantages <= 0, ratio.clamp(0.0, 1.0), torch.ones_like(ratio)).detach()
    mask = response_mask.to(log_prob.dtype)
    return (-alpha * advantages * log_prob * mask).sum() / mask.sum()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_trinity_topr_is_the_token_ratio_form_in_gradient_not_the_papers(seed):
    log_prob, old_log_prob, advantages, response_mask = random_batch(seed)
    _, trinity = gradient_of(lambda lp: trinity_topr(lp, old_log_prob, advantages, response_mask), log_prob)
    level = "actor_rollout_ref.actor.policy_loss.topr_ratio_level"
    forms = {}
    for form in ("token", "sequence"):
        config = loss_config("topr", f"{level}={form}")
        _, forms[form] = gradient_of(
            lambda lp: call_registered_loss("topr", lp, old_log_prob, advantages, response_mask, "token-mean", config)[0], log_prob
        )
    torch.testing.assert_close(forms["token"], trinity, rtol=1e-9, atol=1e-12)
    assert not torch.allclose(forms["sequence"], trinity)


def areal_m2po_mask(squared, response_mask, threshold):
    """AReaL's rule as described in its code: all tokens of the micro-batch, sorted by squared log-ratio (largest first);
    mask the first k, k the first index whose suffix mean is below the threshold (all but one if none is)."""
    values = squared[response_mask]
    order = torch.argsort(values, descending=True)
    ordered = values[order]
    suffix_means = [ordered[k:].mean().item() for k in range(len(ordered))]
    below = [k for k, mean in enumerate(suffix_means) if mean < threshold]
    count = below[0] if below else len(ordered) - 1
    keep_values = torch.ones_like(values, dtype=torch.bool)
    keep_values[order[:count]] = False
    keep = torch.zeros_like(response_mask)
    keep[response_mask] = keep_values
    return keep


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_areal_m2po_mask_is_m2po_over_all_tokens(seed):
    log_prob, old_log_prob, advantages, response_mask = random_batch(seed, spread=0.6)
    threshold = 0.04
    keep = areal_m2po_mask((log_prob - old_log_prob) ** 2, response_mask, threshold)
    assert (~keep & response_mask).any() and (keep & response_mask).any()
    rho = torch.exp(log_prob - old_log_prob)
    expected = -(advantages * rho * keep) / response_mask.sum()  # the paper's objective on AReaL's mask, token mean
    config = loss_config("m2po", "actor_rollout_ref.actor.policy_loss.m2_tokens=all")
    _, ours = gradient_of(lambda lp: call_registered_loss("m2po", lp, old_log_prob, advantages, response_mask, "token-mean", config)[0], log_prob)
    torch.testing.assert_close(ours, expected, rtol=1e-9, atol=1e-12)
    paper = loss_config("m2po")
    _, trust_region = gradient_of(lambda lp: call_registered_loss("m2po", lp, old_log_prob, advantages, response_mask, "token-mean", paper)[0], log_prob)
    assert not torch.allclose(trust_region, expected)  # the paper's token set masks other tokens
