"""A run of verl's ``main_ppo``, from its description to its process: the one run value, its grid, its name, its
command line and the one launcher.

==============  =================================================================================================
module          what it owns
==============  =================================================================================================
``run``         :class:`~verl_ext.runs.run.Run`: what a run is (name, overrides, steps; the preset, setting,
                learning rate and seed it was built from), and the preset layers of its overrides
``grid``        :class:`~verl_ext.runs.grid.Grid`: points (algorithm, setting, learning-rate factor) x learning
                rates x seeds, the figure scripts' and the lab's
``names``       what a run or project name may be, and the one format of run names
``overrides``   Hydra override lists: the key an override sets, merging (a key set later wins), writing a path or a
                name as a value Hydra reads back unchanged
``main_ppo``    the one command line of ``python -m verl.trainer.main_ppo``
``launch``      the one launcher: a run + a backend (where it trains) + outputs (where it writes) -> the command
                line's arguments, and the child process that runs it; the result
``monitor``     a child process run and measured: output to a log, wall and CPU time, peak memory, start-up
==============  =================================================================================================

Below the backends (``verl_ext.cpu``, ``verl_ext.gpu`` implement :class:`~verl_ext.runs.launch.Backend`) and the
entry points that build runs (the run scripts, the lab, the quickstart, the GPU smoke). Nothing here imports
verl or torch.
"""
