"""The experiments layer: how "algorithm X on profile Y with staleness Z" becomes a ``main_ppo`` run.

One home for every preset a run is built from, used by the run scripts, the lab, the CPU/GPU smoke
profiles and the dry run alike:

==================  =====================================================================================
module              what it owns
==================  =====================================================================================
``algorithms``      the algorithm presets (estimator + policy loss + their settings), derived from
                    :mod:`verl_ext.catalog`; ``NAME@EPS_LOW_EPS_HIGH`` clipping ranges; aliases
``settings``        the staleness settings (``on_policy``, ``sync_interval_M``, ``sync_offset_N``, ...)
``run_names``       the one format of run names (what any name may hold: :mod:`verl_ext.runs.names`)
``profiles``        the REC paper's Table 1 columns (dataset + model + hyperparameters) as overrides
``figures``         the grid of each figure script
``environment``     the run scripts' environment variables, read once and checked
``cells``           a grid -> named runs with their merged ``main_ppo`` overrides (merged by
                    :func:`verl_ext.runs.overrides.merge_overrides`, as every launcher does)
``launch``          the modes: dry run, CPU / GPU smoke, real runs
``__main__``        ``python -m verl_ext.experiments run|sweep|figure|list`` (the bash scripts exec it)
==================  =====================================================================================

Nothing here imports verl or torch until a config is composed or a run started (``algorithms`` reads the
registered names from :mod:`verl_ext.catalog`, which imports torch only when a loss is computed): every bad
argument or variable is refused before that (tests/adversarial/test_launcher_variables.py).
"""
