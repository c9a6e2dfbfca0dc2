"""The run scripts' layer: how ``bash run_scripts/<dataset>/<figure>.sh`` (and ``verl-ext run|sweep|figure``)
becomes ``main_ppo`` runs.

==================  =====================================================================================
module              what it owns
==================  =====================================================================================
``profiles``        the REC paper's Table 1 columns (dataset + model + hyperparameters) as overrides
``catalogue``       every named grid (:class:`verl_ext.runs.grid.Grid`): each figure script's and each finding
                    the lab tests
``environment``     the run scripts' environment variables, read once and checked, and what they make of a
                    script's runs (their overrides, the mode's backend, the outputs' layout)
``modes``           the modes: dry run, CPU / GPU smoke, real runs, every run composed and checked first, then
                    started by the one launcher (:mod:`verl_ext.runs.launch`)
``__main__``        ``python -m verl_ext.experiments run|sweep|figure|list`` (the bash scripts exec it): the
                    command -> its grid -> its runs (the one planner, :meth:`verl_ext.runs.grid.Grid.runs`)
==================  =====================================================================================

What the runs are built from lives below, shared with the lab, the quickstart and the GPU smoke: the algorithm
presets (:mod:`verl_ext.algorithms.presets`), the staleness settings (:mod:`verl_ext.staleness.setting`), the
run value, its grid and its names (:mod:`verl_ext.runs`).

Nothing here imports verl or torch until a config is composed or a run started (the presets read the registered
names from :mod:`verl_ext.algorithms.registry`, which imports torch only when a loss is computed): every bad
argument or variable is refused before that (tests/adversarial/test_launcher_variables.py).
"""
