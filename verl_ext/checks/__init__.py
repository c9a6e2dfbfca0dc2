"""verl-ext's checks of what a user gives it, each rule in one module named for what it checks. All raise the one
error type, in the one message shape, of :mod:`verl_ext.config_values` (a module below this package: the algorithms,
the checkpoint backends and the staleness setting use it without the checks that read files or agent loops).

- :mod:`~verl_ext.checks.arguments`: argparse ``type=`` converters (an integer >= 1, >= 0, a number > 0), so a
  command refuses a bad argument while parsing it, before any heavy import.
- :mod:`~verl_ext.checks.batch_arithmetic`: batch sizes and counts >= 1 and dividing as a step divides them
  (mini-batches, ranks, micro-batches).
- :mod:`~verl_ext.checks.resume`: the checkpoint a run resumes from; :mod:`~verl_ext.checks.lora`: LoRA settings
  verl would ignore; :mod:`~verl_ext.checks.tools`: a multi-turn tool configuration that cannot run.

Who uses them: :mod:`verl_ext.driver_checks` (the checks of a whole ``main_ppo`` config that verl does not run
for us, joined to verl's ``validate_config`` in the driver before Ray starts; the dry run,
:func:`verl_ext.runs.compose.check_as_the_driver`, calls the same function) and each command's parser.

Rules that belong to one concept live with it, and the driver's checks call them there: the staleness setting
(:func:`verl_ext.staleness.setting.check_setting`), the ``trainer.v1.delayed_sync`` block and its mode's
requirements (:mod:`verl_ext.staleness.config`), a CPU run's topology (:mod:`verl_ext.cpu_runtime.topology`), the
policy-loss keys (checked when verl builds the actor config).
"""
