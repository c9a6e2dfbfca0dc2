"""A run of verl's ``main_ppo``, from its description to its process: the one run value, its grid and the one
planner, its name, the one composition and the one launcher.

==============  =================================================================================================
module          what it owns
==============  =================================================================================================
``run``         :class:`~verl_ext.runs.run.Run`: what a run is (name, overrides, steps; the preset, setting,
                learning rate and seed it was built from), and the preset layers of its overrides;
                :class:`~verl_ext.runs.run.RunRefused`, a run refused before anything was written or started
``grid``        :class:`~verl_ext.runs.grid.Grid`: points (algorithm, setting, learning-rate factor) x learning
                rates x seeds, the figure scripts' and the lab's; :meth:`~verl_ext.runs.grid.Grid.runs`, the one
                planner (a grid on a base -> its runs, named in the one format)
``names``       what a run or project name may be, and the one format of run names
``overrides``   Hydra override lists: the key an override sets, the value a list last gives a key, merging (a key
                set later wins), writing a path or a name as a value Hydra reads back unchanged
``backend``     :class:`~verl_ext.runs.backend.Backend`: where a run trains (its layers under and over the run's,
                its environment, its platform, what goes around its process)
``outputs``     :class:`~verl_ext.runs.outputs.Outputs`: where runs write, and a run's folder prepared so that
                nothing an earlier run left is lost, nothing written through a link
``compose``     the one composition: a run + a backend + outputs -> ``main_ppo``'s overrides -> the composed config
                -> the driver's checks, on the run's platform (the launcher's, the dry run's, the lab's)
``claims``      what a run's name claims it trains, checked against its composed config (a contradiction is
                refused); what its description records of that config
``launch``      the one launcher: compose, check, prepare the folder, execute (a child process, or an executor such
                as the CPU backend's in-process session); the result
``monitor``     a child process run and measured: output to a log, wall and CPU time, peak memory, start-up; it dies
                with its parent
==============  =================================================================================================

Below the backends (``verl_ext.cpu``, ``verl_ext.gpu`` implement :class:`~verl_ext.runs.backend.Backend`) and the
entry points that build runs (the run scripts, the lab, the quickstart, the GPU smoke). Importing it imports neither
verl nor torch (the composition imports them when it composes a config).
"""
