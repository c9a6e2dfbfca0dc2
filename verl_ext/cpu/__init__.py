"""The CPU harness: what starts real ``main_ppo`` runs on this machine and compares them. What verl loads inside
its processes for such a run (the ``cpu`` platform, rollout and checkpoint engine, the patches) is
:mod:`verl_ext.cpu_runtime`, one floor below :mod:`verl_ext.runs`; this package stands above both.

- :mod:`~verl_ext.cpu.profile` -- the environment and overrides that make any run a CPU run, sized by
  :mod:`~verl_ext.cpu_runtime.topology` for the user's ``trainer.nnodes`` x ``trainer.n_gpus_per_node``;
- :mod:`~verl_ext.cpu.backend` -- the CPU backend of the one launcher (:mod:`verl_ext.runs.launch`: a child
  process, a local cluster around it when the run has several nodes);
- :mod:`~verl_ext.cpu.local_cluster` -- a Ray cluster of several nodes on this machine (``trainer.nnodes > 1``),
  its nodes on loopback (:mod:`~verl_ext.cpu.ray_loopback`);
- :mod:`~verl_ext.cpu.ray_session` -- several runs in this process, sharing one Ray start-up: the launcher's
  in-process executor (the lab, the tests);
- :mod:`~verl_ext.cpu.run_comparison` -- what a run logged compared with another, number for number;
- :mod:`~verl_ext.cpu.quickstart` -- the README's quickstart.

Docs: ``docs/cpu-backend.md``. Importing this package imports neither verl nor torch (its modules do what
they need): ``verl-ext quickstart`` and ``verl-ext gpu-smoke`` refuse a bad argument before torch loads.
"""
