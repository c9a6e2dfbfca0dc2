"""Every policy loss in float32 on a device against a float64 reference on CPU: same inputs, through verl's
registry (``agg_loss`` included), loss and gradient compared.

Where a loss clips, an element whose ratio lies within float32 rounding (~1e-7) of a clip boundary may
fall on the other side of it in float32 and get a zero (or non-zero) gradient where the reference does
not: with realistic inputs that is about one element in millions. So the gradient is compared element by
element within a float32 tolerance, and at most :data:`ALLOWED_FLIPS_PER_MILLION` elements per million
(at least one) may differ beyond it; the loss itself must agree within the tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tests.recipe_config import call_registered_loss, loss_config

ALLOWED_FLIPS_PER_MILLION = 2
RTOL = 1e-4  # float32 keeps ~7 digits; sums over ~1e4 tokens lose ~2 of them
ATOL_SCALE = 1e-5  # absolute tolerance, relative to the largest reference gradient


def aggregation(loss_mode: str) -> str:
    """REC-GSPO's formula is a mean over responses of token means (as the run scripts set it)."""
    return "seq-mean-token-mean" if loss_mode.startswith("rec_gspo") else "token-mean"


def loss_inputs(rows: int = 64, columns: int = 512, seed: int = 0) -> dict[str, torch.Tensor]:
    """float64 inputs like a training batch's: ratios spread across the clip ranges, ragged response masks."""
    generator = torch.Generator().manual_seed(seed)
    old_log_prob = -torch.rand(rows, columns, generator=generator, dtype=torch.float64) * 4
    spread = torch.linspace(0.05, 1.5, rows, dtype=torch.float64)[:, None]  # some rows far off-policy
    log_prob = old_log_prob + torch.randn(rows, columns, generator=generator, dtype=torch.float64) * spread
    advantages = torch.randn(rows, 1, generator=generator, dtype=torch.float64).expand(rows, columns).contiguous()
    lengths = torch.randint(1, columns + 1, (rows,), generator=generator)
    response_mask = torch.arange(columns)[None, :] < lengths[:, None]
    behaviour_ratio = torch.exp(torch.randn(rows, columns, generator=generator, dtype=torch.float64) * 0.1)
    return {"log_prob": log_prob, "old_log_prob": old_log_prob, "advantages": advantages,
            "response_mask": response_mask, "behaviour_ratio": behaviour_ratio}


def loss_and_gradient(loss_mode: str, inputs: dict[str, torch.Tensor], device: str, dtype: torch.dtype,
                      config=None) -> tuple[float, torch.Tensor]:
    """(loss, d loss / d log_prob) on ``device`` in ``dtype``, returned as float64 on CPU."""
    moved = {key: value.to(device=device, dtype=dtype if value.is_floating_point() else value.dtype)
             for key, value in inputs.items()}
    log_prob = moved["log_prob"].clone().requires_grad_(True)
    loss, _metrics = call_registered_loss(
        loss_mode, log_prob, moved["old_log_prob"], moved["advantages"], moved["response_mask"],
        aggregation(loss_mode), config=config if config is not None else loss_config(loss_mode),
        behaviour_ratio=moved["behaviour_ratio"],
    )
    loss.backward()
    return float(loss.detach().double().cpu()), log_prob.grad.detach().double().cpu()


@dataclass(frozen=True)
class Comparison:
    loss: float
    reference_loss: float
    elements: int
    beyond_tolerance: int
    largest_difference: float

    @property
    def allowed(self) -> int:
        return max(1, self.elements * ALLOWED_FLIPS_PER_MILLION // 1_000_000)

    @property
    def loss_ok(self) -> bool:
        return abs(self.loss - self.reference_loss) <= RTOL * abs(self.reference_loss) + 1e-7

    @property
    def ok(self) -> bool:
        return self.loss_ok and self.beyond_tolerance <= self.allowed

    def __str__(self) -> str:
        return (f"loss {self.loss:.9g} vs reference {self.reference_loss:.9g}; gradient: {self.beyond_tolerance} of "
                f"{self.elements} elements beyond tolerance (allowed {self.allowed}), largest difference "
                f"{self.largest_difference:.3g}")


def compare(loss: float, gradient: torch.Tensor, reference_loss: float, reference_gradient: torch.Tensor) -> Comparison:
    tolerance = RTOL * reference_gradient.abs() + ATOL_SCALE * float(reference_gradient.abs().max().clamp_min(1e-30))
    difference = (gradient - reference_gradient).abs()
    return Comparison(
        loss=loss, reference_loss=reference_loss, elements=reference_gradient.numel(),
        beyond_tolerance=int((difference > tolerance).sum()), largest_difference=float(difference.max()),
    )
