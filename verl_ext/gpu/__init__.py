"""verl-ext on one GPU with vLLM: the GPU profile, a harness for real ``main_ppo`` runs, the smoke command.

- :mod:`~verl_ext.gpu.profile` -- environment and overrides of a GPU run, and of a run script's GPU smoke;
- :mod:`~verl_ext.gpu.device` -- is there a CUDA GPU and vLLM here, and which (GPU model, driver, versions);
- :mod:`~verl_ext.gpu.backend` -- the GPU backend of the one launcher (:mod:`verl_ext.runs.launch`): the GPU
  profile, a child process per run, its peak GPU memory;
- :mod:`~verl_ext.gpu.smoke_checks` -- the smoke run's summary and checks, pure functions over verl's
  logged metrics (tested on CPU);
- :mod:`~verl_ext.gpu.smoke` -- ``verl-ext gpu-smoke`` / ``bash run_scripts/gpu/smoke.sh``.

Docs: ``docs/gpu.md``. Importing this package imports neither verl nor torch.
"""
