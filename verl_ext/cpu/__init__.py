"""verl on CPU: a ``cpu`` platform, a ``transformers`` rollout backend and a harness for real ``main_ppo`` runs.

- :mod:`~verl_ext.cpu.platform` -- the platform verl selects with ``VERL_PLATFORM=cpu``;
- :mod:`~verl_ext.cpu.rollout_server` (with :mod:`~verl_ext.cpu.generation`,
  :mod:`~verl_ext.cpu.weight_checksum`, :mod:`~verl_ext.rollout_events`),
  :mod:`~verl_ext.cpu.rollout_replica`, :mod:`~verl_ext.cpu.server_adapter` -- rollout name ``cpu``;
- :mod:`~verl_ext.cpu.patches` -- the four patches a CPU run needs (listed in :mod:`verl_ext.verl_internals`);
- :mod:`~verl_ext.cpu.registration` -- ``register_cpu_backend()``, called by :mod:`verl_ext.plugin`;
- :mod:`~verl_ext.cpu.profile` -- the environment and overrides that make any run a CPU run, sized by
  :mod:`~verl_ext.cpu.topology` for the user's ``trainer.nnodes`` x ``trainer.n_gpus_per_node`` (and what
  such a topology needs from Ray, checked before it starts);
- :mod:`~verl_ext.cpu.local_cluster` -- a Ray cluster of several nodes on this machine (``trainer.nnodes > 1``);
- :mod:`~verl_ext.cpu.backend` -- the CPU backend of the one launcher (:mod:`verl_ext.runs.launch`: a child
  process, a local cluster around it when the run has several nodes);
- :mod:`~verl_ext.cpu.ray_session` -- several runs in this process, sharing one Ray start-up: the launcher's
  in-process executor (the lab, the tests);
- :mod:`~verl_ext.cpu.run_comparison` -- what a run logged compared with another, number for number;
- :mod:`~verl_ext.cpu.sharded_checkpoint` -- the actor's weights in verl's sharded checkpoint, joined;
- :mod:`~verl_ext.cpu.quickstart` -- the README's quickstart.

Docs: ``docs/cpu-backend.md``. Importing this package imports neither verl nor torch (its modules do what
they need): ``verl-ext quickstart`` and ``verl-ext gpu-smoke`` refuse a bad argument before torch loads.
"""
