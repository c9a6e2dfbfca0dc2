"""The algorithm core: verl-ext's policy losses and advantage estimators, one module each.

A loss module holds its formula (in the docstring), its hyperparameters and their defaults, and its registration
(``@policy_loss("name", ...)`` on the function, :mod:`verl_ext.algorithms.registry`). Shared tensor helpers:
:mod:`~verl_ext.algorithms.tokens` (inputs, the per-token loss matrix, diagnostics), :mod:`~verl_ext.algorithms.masks`
(the REC clipping masks), :mod:`~verl_ext.algorithms.groups` (per-group means of the estimators). The verl glue
(:mod:`~verl_ext.algorithms.verl_glue`) wraps them into verl's call signatures and registries;
:mod:`~verl_ext.algorithms.loss_config` is the policy-loss config the recipe's ``_target_`` names, with its checks.

Importing the package imports every algorithm module below (each registers itself), and not torch.
"""

# isort: skip_file
from verl_ext.algorithms import registry  # noqa: F401  (first: the modules below register into it)

# Each module registers itself; the order of these imports is the order of ``verl-ext list`` and the presets.
from verl_ext.algorithms import reinforce, rec, rec_gspo, opmd, asymre, red_weight, offpolicy_grpo, topr, m2po  # noqa: F401
from verl_ext.algorithms import rec_advantage, red_drop  # noqa: F401
