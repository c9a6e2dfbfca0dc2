"""``python -m verl_ext.tools``: print the tiny counting tool task's overrides, quoted for a shell (``eval`` them
into a command line: the chat template holds quotes and newlines)."""

import shlex
import sys

from verl_ext.tools import tiny_count_tool_overrides


def main() -> int:
    print(" ".join(shlex.quote(override) for override in tiny_count_tool_overrides()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
