"""The CPU lab: the papers' off-policy comparisons through verl's ``main_ppo`` on the CPU backend.

``verl-ext lab`` (:mod:`verl_ext.lab.cli`). The algorithms, settings and run names are the run scripts'
(:mod:`verl_ext.experiments`). Modules: :mod:`~verl_ext.lab.plan` (the lab's runs and their overrides),
:mod:`~verl_ext.lab.grids` (one preset per finding),
:mod:`~verl_ext.lab.runner` (running them in this process, one Ray session), :mod:`~verl_ext.lab.summary`
(figures of a run, across seeds), :mod:`~verl_ext.lab.report` (records and tables),
:mod:`~verl_ext.lab.figure` (the PNG).
"""
