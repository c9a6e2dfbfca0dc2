"""One module per algorithm; each returns :class:`~verl_ext.losses.terms.LossTerms` (a per-token loss
matrix and diagnostics). verl's ``agg_loss`` aggregates it: see :mod:`verl_ext.registration`."""

from verl_ext.losses.asymre import asymre_loss
from verl_ext.losses.m2po import m2po_loss
from verl_ext.losses.offpolicy_grpo import offpolicy_grpo_loss
from verl_ext.losses.opmd import opmd_loss
from verl_ext.losses.rec import rec_loss
from verl_ext.losses.rec_gspo import rec_gspo_loss
from verl_ext.losses.red_weight import red_weight_loss
from verl_ext.losses.reinforce import reinforce_loss
from verl_ext.losses.topr import topr_loss
from verl_ext.losses.terms import LossTerms

__all__ = [
    "LossTerms",
    "asymre_loss",
    "m2po_loss",
    "offpolicy_grpo_loss",
    "opmd_loss",
    "rec_gspo_loss",
    "rec_loss",
    "red_weight_loss",
    "reinforce_loss",
    "topr_loss",
]
