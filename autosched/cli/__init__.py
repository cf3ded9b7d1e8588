"""The ``autosched`` command line: one module per command group, wired here.

Every deliberate error (an :class:`AutoschedError`) prints one line naming the problem
and exits with its ``exit_code``: 2 for bad input, 1 for an internal compiler error;
there is no traceback for either. Every number a flag takes is bounded at parse time
(:mod:`.numbers`). Output cut short by its reader (``| head``) ends quietly with the
status of a SIGPIPE (141).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from collections.abc import Sequence

from sim.errors import AutoschedError

from . import (
    compile_cmds,
    db_cmd,
    hw_cmd,
    kernels_cmd,
    lookup_cmd,
    models_cmd,
    regress_cmd,
    sim_cmd,
    tune_cmd,
)

__all__ = ["main"]

COMMANDS = (hw_cmd, sim_cmd, models_cmd, tune_cmd, lookup_cmd, db_cmd, compile_cmds, regress_cmd,
            kernels_cmd)


MAX_MESSAGE = 600  # characters of an error line: it names the problem, never a whole input


def one_line(text: str) -> str:
    """``text`` on one line of at most :data:`MAX_MESSAGE` characters."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 3] + "..."


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit status 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        message = re.sub(r"^argument (\S+): \1 ", r"\1 ", message)  # the flag named once
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


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
        code = int(args.run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except AutoschedError as e:
        print("autosched: error: " + one_line(str(e)), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("autosched: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as SIGPIPE
        _drop_stdout()
        return 128 + signal.SIGPIPE
    except OSError as e:  # a path the system refuses (a name too long, a loop of symlinks)
        where = f"{e.filename}: " if e.filename is not None else ""
        print("autosched: error: " + one_line(f"{where}{e.strerror or e}"), file=sys.stderr)
        return 2


def _drop_stdout() -> None:
    """Point the process's stdout at /dev/null, so the exit flush does not fail again."""
    if sys.stdout is not sys.__stdout__:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
