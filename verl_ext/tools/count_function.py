"""The counting task's calculator as a verl function tool (``actor_rollout_ref.rollout.multi_turn.function_tool_path``
names this file; verl's agent-loop worker executes it by path). The rule: :mod:`verl_ext.tiny.count_tool`.

The decorated function is the task module's own object, so executing this file twice in one process (verl by path,
or Python importing it as ``verl_ext.tools.count_function``) registers one tool, not a clash. verl's loader returns
the tools that a load *added*: a process that imported this module before verl loads it by path would give verl no
tool, so nothing imports it (verl is imported inside the function, which keeps module scans that import every module
importing verl from importing this one).
"""

from verl_ext.tiny import count_tool


def _registered():
    from verl.tools.function_tool import function_tool

    return function_tool(count_tool.TOOL_NAME)(count_tool.next_number)


next_number = _registered()
