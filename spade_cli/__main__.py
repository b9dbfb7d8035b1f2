"""`python -m spade_cli <command> ...` runs `spade-<command> ...` without console scripts."""

import importlib
import sys

from .commands import COMMANDS


def main() -> None:
    names = sorted(n.removeprefix("spade-") for n in COMMANDS)
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        sys.stderr.write(
            "usage: python -m spade_cli COMMAND [ARGS]...\ncommands: " + ", ".join(names) + "\n"
        )
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    prog = "spade-" + sys.argv[1].removeprefix("spade-")
    if prog not in COMMANDS:
        sys.stderr.write(
            f"spade: error: unknown command {sys.argv[1]!r}; commands: {', '.join(names)}\n"
        )
        sys.exit(2)
    module = importlib.import_module(COMMANDS[prog])
    module.main(sys.argv[2:])


if __name__ == "__main__":
    main()
