"""The CPU lab: the papers' off-policy comparisons through verl's ``main_ppo`` on the CPU backend.

``verl-ext lab`` (:mod:`verl_ext.lab.cli`). The algorithms, settings, run names, grids (one per finding:
:data:`verl_ext.experiments.catalogue.FINDINGS`) and the planner (:meth:`verl_ext.runs.grid.Grid.runs`) are the run
scripts'. Modules: :mod:`~verl_ext.lab.plan` (the lab's base and defaults of its runs),
:mod:`~verl_ext.lab.runner` (running them in this process, one Ray session, through the one launcher), :mod:`~verl_ext.lab.summary`
(figures of a run, across seeds), :mod:`~verl_ext.lab.report` (records and tables),
:mod:`~verl_ext.lab.figure` (the PNG).
"""
