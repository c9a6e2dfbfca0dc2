"""A multi-turn tool configuration that cannot run: refused in the driver, before Ray, naming the key.

verl's agent-loop workers load the tools, the tool parser and the agent loop only once Ray and the rollout engine
are up; a wrong name or file fails there, minutes into a GPU run, or -- worse -- runs silently without tools.
:func:`check_tools` (called by :func:`verl_ext.driver_checks.check_run_config`, so by ``main_ppo``'s driver and
the dry run) does the loading verl would do, in the driver:

- ``rollout.agent.agent_loop_config_path``: a readable YAML list of agent loops, each with a ``name`` and an
  importable ``_target_`` (verl-ext's seeded tool agent's ``max_tokens_per_turn`` checked too);
- ``rollout.agent.default_agent_loop``: registered (verl's or verl-ext's agent loops, or that file's);
- ``rollout.multi_turn.function_tool_path``: a Python file whose ``@function_tool`` functions load (verl executes it
  the same way); ``rollout.multi_turn.tool_config_path``: a readable YAML whose tools name importable classes of
  a known type with valid schemas (not instantiated); no tool name twice;
- with a tool agent loop (verl's ``ToolAgentLoop`` or a subclass) as the default: at least one tool (else every
  trajectory ends after one turn, silently single-turn), ``rollout.multi_turn.format`` a registered tool parser,
  and on the CPU rollout a parser that needs no ``stop_token_ids`` (the CPU rollout has none); with verl-ext's
  seeded tool agent the rollout seed it derives every turn's seed from.

verl's multi-turn limits (``rollout.multi_turn.*``, read by verl's ``ToolAgentLoop``) are checked for type and range
whatever the agent loop (:func:`check_multi_turn_limits`), since a wrong value changes what the task does without a
word: ``max_assistant_turns`` and ``max_user_turns`` null (no limit) or an integer >= 1 (0 is read as no limit, a
negative one ends every trajectory after its first turn); ``max_parallel_calls`` an integer >= 1 (0 runs no tool
call); ``max_tool_response_length`` an integer >= 1, and >= 2 with ``middle`` truncation (verl keeps
``length // 2`` characters from each end, and ``text[-0:]`` is the whole answer: a 0 or 1 lets a tool answer of any
size through whole); ``tool_response_truncate_side`` ``left``, ``middle`` or ``right`` (verl truncates in the middle
for any other word); ``tokenization_sanity_check_mode`` one of verl's modes; ``enable`` true or false.

Every file named here is read only when it is a regular file of bounded size (:func:`verl_ext.files.read_yaml_file`,
:func:`verl_ext.files.open_regular`): a FIFO would block the driver for ever, a link to ``/dev/zero`` would read
until memory runs out.

A dataset's ``agent_name`` column picks the agent loop per row, over ``default_agent_loop``: rows are not read here.
"""

from __future__ import annotations

import inspect
from typing import Any, Optional

from omegaconf import OmegaConf

from verl_ext.config_values import ConfigError, is_int, reject, require_int
from verl_ext.files import open_regular, read_yaml_file
from verl_ext.seeding import SEEDED_TOOL_AGENT_LOOP

ROLLOUT = "actor_rollout_ref.rollout"
AGENT_LOOP_CONFIG = f"{ROLLOUT}.agent.agent_loop_config_path"
DEFAULT_AGENT_LOOP = f"{ROLLOUT}.agent.default_agent_loop"
FUNCTION_TOOLS = f"{ROLLOUT}.multi_turn.function_tool_path"
TOOL_CONFIG = f"{ROLLOUT}.multi_turn.tool_config_path"
PARSER = f"{ROLLOUT}.multi_turn.format"
MULTI_TURN = f"{ROLLOUT}.multi_turn"
TRUNCATE_SIDES = ("left", "middle", "right")  # verl's ToolAgentLoop: any other word truncates in the middle
SANITY_CHECK_MODES = ("disable", "strict", "ignore_strippable")  # verl's TokenizationSanityCheckModeEnum
# a tool or agent-loop config is a few KB; a function tool file a few hundred lines
MAX_CONFIG_BYTES = 16 * 1024 * 1024
_UNSET = object()


def check_max_tokens_per_turn(value: Any) -> Optional[int]:
    """``max_tokens_per_turn``: null (verl's behaviour: the rest of the response budget) or an integer >= 1."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{SEEDED_TOOL_AGENT_LOOP}: max_tokens_per_turn={value!r} is invalid: allowed values are "
                         "null or an integer >= 1 (the most tokens one assistant turn generates)")
    return value


def _value(config: Any, key: str) -> Any:
    return OmegaConf.select(config, key, default=None)


def _resolve(key: str, path: Any) -> str:
    """The file ``key`` names, as verl's workers find it; a :class:`ConfigError` when there is none, or when it is no
    regular file of at most :data:`MAX_CONFIG_BYTES` (a FIFO, a device, a link to an endless file)."""
    from verl.utils.import_utils import resolve_config_path

    try:
        resolved = resolve_config_path(str(path))
    except FileNotFoundError as error:
        raise ConfigError(f"{key}={path!r}: no such file ({error}); verl's workers would fail on it after Ray "
                          "and the rollout engine started") from error
    try:
        open_regular(resolved, MAX_CONFIG_BYTES, f"file {key} names", ConfigError).close()
    except ConfigError as error:
        raise ConfigError(f"{key}={path!r}: {error}") from None
    return resolved


def _read_yaml(key: str, path: Any, resolved: str) -> Any:
    try:
        return read_yaml_file(resolved, MAX_CONFIG_BYTES, f"file {key} names", ConfigError)
    except ConfigError as error:
        raise ConfigError(f"{key}={path!r}: {error}") from None


def _limit(key: str, value: Any, allowed: str, why: str, minimum: int = 1, nullable: bool = False) -> None:
    if value is _UNSET or (nullable and value is None):
        return
    if not is_int(value) or value < minimum:
        reject(key, value, allowed, why)


def check_multi_turn_limits(config: Any) -> None:
    """verl's ``rollout.multi_turn.*`` limits, for type and range (module docstring)."""
    def value(name: str) -> Any:
        return OmegaConf.select(config, f"{MULTI_TURN}.{name}", default=_UNSET)

    for name in ("max_assistant_turns", "max_user_turns"):
        _limit(f"{MULTI_TURN}.{name}", value(name), "null (no limit) or an integer >= 1",
               "verl's tool agent reads 0 as no limit and ends every trajectory after its first turn below it.",
               nullable=True)
    _limit(f"{MULTI_TURN}.max_parallel_calls", value("max_parallel_calls"), "an integer >= 1",
           "verl's tool agent runs the first max_parallel_calls tool calls of a turn: 0 runs none, and the trajectory "
           "goes on without the answers.")
    side = value("tool_response_truncate_side")
    if side is not _UNSET and side not in TRUNCATE_SIDES:
        reject(f"{MULTI_TURN}.tool_response_truncate_side", side, ", ".join(TRUNCATE_SIDES),
               "verl's tool agent truncates in the middle for any other value.")
    minimum = 2 if side in (_UNSET, "middle") else 1
    _limit(f"{MULTI_TURN}.max_tool_response_length", value("max_tool_response_length"),
           f"an integer >= {minimum}" + (" with tool_response_truncate_side=middle" if minimum == 2 else ""),
           "The most characters of a tool's answer the model sees; verl's middle truncation keeps length // 2 from each "
           "end, and a half of 0 keeps the whole answer (text[-0:]), however long.", minimum=minimum)
    mode = value("tokenization_sanity_check_mode")
    if mode is not _UNSET and mode not in SANITY_CHECK_MODES:
        reject(f"{MULTI_TURN}.tokenization_sanity_check_mode", mode, ", ".join(SANITY_CHECK_MODES),
               "verl's TokenizationSanityCheckModeEnum.")
    enable = value("enable")
    if enable is not _UNSET and not isinstance(enable, bool):
        reject(f"{MULTI_TURN}.enable", enable, "true or false")


def _agent_loop_entries(config: Any) -> dict[str, dict[str, Any]]:
    """The agent loops of ``agent_loop_config_path``, by name (empty when unset), each checked."""
    path = _value(config, AGENT_LOOP_CONFIG)
    if not path:
        return {}
    resolved = _resolve(AGENT_LOOP_CONFIG, path)
    entries = _read_yaml(AGENT_LOOP_CONFIG, path, resolved)
    if not isinstance(entries, list):
        raise ConfigError(f"{AGENT_LOOP_CONFIG}={path!r}: {resolved} must hold a list of agent loops "
                          f"(- name: ..., _target_: module.Class), got a {type(entries).__name__}")
    loops = {}
    for index, entry in enumerate(entries):
        where = f"{AGENT_LOOP_CONFIG}={path!r}, entry {index}"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not isinstance(entry.get("_target_"), str):
            raise ConfigError(f"{where}: expected an object with a string 'name' and '_target_', got {entry!r}")
        cls = _import_class(entry["_target_"], where + ", field '_target_'")
        if getattr(cls, "derives_turn_seeds", False):
            try:
                check_max_tokens_per_turn(entry.get("max_tokens_per_turn"))
            except ValueError as error:
                raise ConfigError(f"{where}, field 'max_tokens_per_turn': {error}") from error
        loops[entry["name"]] = {**entry, "class": cls}
    return loops


def _import_class(target: str, where: str) -> type:
    import importlib

    module_name, _, name = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except Exception as error:  # a module that does not import, or no such class
        raise ConfigError(f"{where}: {target!r} does not import ({type(error).__name__}: {error})") from error
    if not inspect.isclass(cls):
        raise ConfigError(f"{where}: {target!r} is not a class")
    return cls


def _default_agent_loop_class(config: Any, from_file: dict[str, dict[str, Any]]) -> Optional[type]:
    """The class of ``default_agent_loop`` (None: unset); refused when no registry or file has it."""
    name = _value(config, DEFAULT_AGENT_LOOP)
    if name is None:
        return None
    if name in from_file:
        return from_file[name]["class"]
    import verl.experimental.agent_loop  # noqa: F401  (registers verl's agent loops, and verl-ext's through the plugin)
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    if name not in _agent_loop_registry:
        reject(DEFAULT_AGENT_LOOP, name, f"a registered agent loop ({', '.join(sorted(_agent_loop_registry))}) or "
               f"one of {AGENT_LOOP_CONFIG}'s", "verl's agent-loop workers look it up after Ray starts.")
    return _import_class(_agent_loop_registry[name]["_target_"], DEFAULT_AGENT_LOOP)


def _tool_names(config: Any) -> list[str]:
    """The names of the configured tools (function tools loaded, config tools checked), each file checked."""
    names: list[str] = []
    path = _value(config, FUNCTION_TOOLS)
    if path:
        from verl.tools.function_tool import load_function_tools_from_path

        resolved = _resolve(FUNCTION_TOOLS, path)
        try:
            names += [tool.name for tool in load_function_tools_from_path(resolved)]
        except Exception as error:  # the file's import, a @function_tool whose schema cannot be built
            raise ConfigError(f"{FUNCTION_TOOLS}={path!r}: the function tools do not load "
                              f"({type(error).__name__}: {error})") from error
        if not names:
            raise ConfigError(f"{FUNCTION_TOOLS}={path!r}: no @function_tool function in {resolved}")
    path = _value(config, TOOL_CONFIG)
    if path:
        names += _config_tool_names(path, _resolve(TOOL_CONFIG, path))
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"{FUNCTION_TOOLS} and {TOOL_CONFIG}: tool name(s) {repeated} given twice (verl refuses it "
                          "in its workers)")
    return names


def _config_tool_names(path: Any, resolved: str) -> list[str]:
    from verl.tools.schemas import OpenAIFunctionToolSchema
    from verl.tools.tool_registry import ToolType

    document = _read_yaml(TOOL_CONFIG, path, resolved)
    if not isinstance(document, dict):
        raise ConfigError(f"{TOOL_CONFIG}={path!r}: {resolved} must hold a YAML mapping with a list 'tools', got a "
                          f"{type(document).__name__}")
    tools = document.get("tools")
    if not isinstance(tools, list) or not tools:
        raise ConfigError(f"{TOOL_CONFIG}={path!r}: {resolved} needs a non-empty list 'tools'")
    names = []
    for index, tool in enumerate(tools):
        where = f"{TOOL_CONFIG}={path!r}, tools[{index}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("class_name"), str):
            raise ConfigError(f"{where}: expected an object with a string 'class_name'")
        _import_class(tool["class_name"], f"{where}, field 'class_name'")
        kind = (tool.get("config") or {}).get("type")
        if kind not in {member.value for member in ToolType}:
            raise ConfigError(f"{where}, field 'config.type': {kind!r} is not one of verl's tool types "
                              f"({', '.join(member.value for member in ToolType)})")
        schema = tool.get("tool_schema")
        if schema is None:
            raise ConfigError(f"{where}, field 'tool_schema': missing (the model is shown the tool by its schema)")
        try:
            names.append(OpenAIFunctionToolSchema.model_validate(schema).function.name)
        except Exception as error:  # pydantic's ValidationError names the field
            raise ConfigError(f"{where}, field 'tool_schema': {error}") from error
    return names


def check_tools(config: Any) -> None:
    """Raise :class:`ConfigError` on the first part of a multi-turn tool configuration that cannot run (module
    docstring)."""
    check_multi_turn_limits(config)
    from_file = _agent_loop_entries(config)
    tool_names = _tool_names(config)
    cls = _default_agent_loop_class(config, from_file)
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

    if cls is None or not issubclass(cls, ToolAgentLoop):
        return
    name = _value(config, DEFAULT_AGENT_LOOP)
    if not tool_names:
        reject(FUNCTION_TOOLS, _value(config, FUNCTION_TOOLS), f"a function tool file (or a {TOOL_CONFIG}) with "
               f"{DEFAULT_AGENT_LOOP}={name}", "A tool agent without tools ends every trajectory after its first turn.")
    from verl.experimental.agent_loop.tool_parser import ToolParser

    parser = _value(config, PARSER)
    if parser not in ToolParser._registry:
        reject(PARSER, parser, f"a registered tool parser ({', '.join(sorted(ToolParser._registry))})",
               "verl's tool agent loop looks it up in each agent-loop worker.")
    if _value(config, f"{ROLLOUT}.name") == "cpu" and ToolParser._registry[parser].stop_token_ids is not ToolParser.stop_token_ids:
        reject(PARSER, parser, "a tool parser without stop_token_ids on the CPU rollout",
               "The CPU rollout refuses per-request stop tokens, which this parser asks for at every turn.")
    if getattr(cls, "derives_turn_seeds", False):
        require_int(f"{ROLLOUT}.seed", _value(config, f"{ROLLOUT}.seed"), 0,
                    f"{DEFAULT_AGENT_LOOP}={name} derives every turn's sampling seed from it.")
