"""verl on CPU: a ``cpu`` platform, a ``transformers`` rollout backend and a harness for real ``main_ppo`` runs.

- :mod:`verl_ext.cpu.platform` -- the platform verl selects with ``VERL_PLATFORM=cpu``;
- :mod:`verl_ext.cpu.rollout_server`, :mod:`~verl_ext.cpu.rollout_replica`,
  :mod:`~verl_ext.cpu.server_adapter` -- rollout name ``cpu`` (``actor_rollout_ref.rollout.name=cpu``);
- :mod:`verl_ext.cpu.patches` -- the two torch patches a CPU run needs;
- :mod:`verl_ext.cpu.registration` -- ``register_cpu_backend()``, called by :mod:`verl_ext.plugin`;
- :mod:`verl_ext.cpu.profile` and :mod:`verl_ext.cpu.launch` -- the overrides that make any run a CPU run,
  and the launcher returning each step's metrics.

Importing this package does not import verl.
"""

from verl_ext.cpu.registration import register_cpu_backend

__all__ = ["register_cpu_backend"]
