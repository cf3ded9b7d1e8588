"""The ``autosched`` command line: one module per command group, wired here.

Every deliberate error (an :class:`AutoschedError`) prints one line naming the problem
and exits with its ``exit_code``: 2 for bad input, 1 for an internal compiler error;
there is no traceback for either.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sim.errors import AutoschedError

from . import compile_cmds, db_cmd, hw_cmd, lookup_cmd, models_cmd, sim_cmd, tune_cmd

__all__ = ["main"]

COMMANDS = (hw_cmd, sim_cmd, models_cmd, tune_cmd, lookup_cmd, db_cmd, compile_cmds)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="autosched",
        description="Autotuner and compiler for LLM inference on processing-in-memory devices.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for mod in COMMANDS:
        mod.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except AutoschedError as e:
        print("autosched: error: " + " ".join(str(e).split()), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("autosched: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
