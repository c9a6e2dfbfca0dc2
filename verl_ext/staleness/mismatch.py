"""What staleness costs, measured on a batch: how far the behaviour policy is from the current policy."""

import torch


def _check_shapes(behaviour_log_probs: torch.Tensor, current_log_probs: torch.Tensor, response_mask: torch.Tensor) -> None:
    if not (behaviour_log_probs.shape == current_log_probs.shape == response_mask.shape):
        raise ValueError(
            "behaviour log-probs, current log-probs and response mask must have one shape, got "
            f"{tuple(behaviour_log_probs.shape)}, {tuple(current_log_probs.shape)}, {tuple(response_mask.shape)}"
        )


def behaviour_minus_current_sums(
    behaviour_log_probs: torch.Tensor, current_log_probs: torch.Tensor, response_mask: torch.Tensor
) -> tuple[float, float]:
    """The two sums of the gap below on one piece of a batch (a micro-batch, a rank's share): ``(sum_{i,t} M_it
    (log pi_b - log pi_c), sum_{i,t} M_it)``, in float64. Pieces add up: the gap of a whole batch is the sum of
    its pieces' first sums over the sum of their second (how the actor update measures it, spread over
    micro-batches and data-parallel ranks: :mod:`verl_ext.staleness.mismatch_in_update`)."""
    _check_shapes(behaviour_log_probs, current_log_probs, response_mask)
    mask = response_mask.to(torch.float64)
    difference = behaviour_log_probs.to(torch.float64) - current_log_probs.to(torch.float64)
    gap = torch.where(mask > 0, difference * mask, torch.zeros_like(difference))  # padding may hold anything
    return float(gap.sum()), float(mask.sum())


def mean_behaviour_minus_current_log_prob(
    behaviour_log_probs: torch.Tensor, current_log_probs: torch.Tensor, response_mask: torch.Tensor
) -> float:
    """Mean over response tokens of log pi_behaviour(y_t) - log pi_current(y_t).

        gap = sum_{i,t} M_it (log pi_b(y_it) - log pi_c(y_it)) / sum_{i,t} M_it

    ``pi_b`` is the policy version that generated the batch (the rollout engine's log-probs), ``pi_c`` the
    actor about to be updated on it; all tensors are (batch, response_length) and M is the response mask.
    The tokens were sampled from pi_b, so the gap estimates the per-token KL(pi_b || pi_c): about 0 for
    fresh data (up to the rollout/trainer numerical mismatch), growing with the lag. NaN when M is empty.
    """
    return gap_from_sums(*behaviour_minus_current_sums(behaviour_log_probs, current_log_probs, response_mask))


def gap_from_sums(gap_sum: float, token_count: float) -> float:
    """The token mean from :func:`behaviour_minus_current_sums` (added up over pieces); NaN for no token."""
    return gap_sum / token_count if token_count > 0 else float("nan")
