"""Every number the command line takes, typed and bounded at parse time, in one place.

Each flag's ``type=`` is one of the functions below, built from :data:`BOUNDS`: the range
a real run could have (a serving batch, a model's context, the simulator processes of one
machine...). A value outside it, or not a number, is refused by ``argparse`` before any
work with one line naming the flag and the range, so ``--batch 1e12`` never reaches a
simulator that would size its memory for it.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["BOUNDS", "WORKLOAD_DTYPES", "bounded", "dims", "integer", "real"]

# name -> (lowest, highest): what one real run could use, with room to spare
BOUNDS: dict[str, tuple[float, float]] = {
    "batch": (1, 4096),  # sequences served at once (decode) or prompts (prefill)
    "context": (1, 1 << 20),  # KV positions or prompt tokens: a million-token model
    "trials": (0, 1_000_000),  # measurements of one tune (about a second each)
    "workers": (1, 1024),  # simulator processes on one machine
    "timeout": (0, 86_400),  # seconds one measurement may take: above 0, at most a day
    "seed": (0, 2**32 - 1),  # what numpy and torch take
    "steps": (1, 4096),  # tokens ``run`` generates
    "size": (1, 1 << 20),  # a GEMV dimension (``sim gemv --out/--in``)
    "dim": (1, 1 << 24),  # a workload dimension (``lookup --shape``)
    "repeats": (1, 1000),  # timed runs of a regression case
    "band": (1.0, 1000.0),  # wall-clock band of the regression suite
}


WORKLOAD_DTYPES = ("fp16", "bf16")  # the number types of the models the frontend captures


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _got(value: float | str) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"a {len(text)}-character value"


def bounded(flag: str, value: float, name: str, *, open_low: bool = False) -> float:
    """``value`` if it lies in ``BOUNDS[name]``; else ``ArgumentTypeError`` naming ``flag``."""
    lo, hi = BOUNDS[name]
    allowed = f"(allowed: {'above ' if open_low else ''}{_num(lo)} to {_num(hi)})"
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{flag} must be a finite number {allowed}, "
                                         f"got {value}")
    if value < lo or (open_low and value <= lo):
        raise argparse.ArgumentTypeError(f"{flag} must be {'>' if open_low else '>='} "
                                         f"{_num(lo)}, got {_got(value)} {allowed}")
    if value > hi:
        raise argparse.ArgumentTypeError(f"{flag} must be <= {_num(hi)}, got {_got(value)} "
                                         f"{allowed}")
    return value


def integer(flag: str, name: str | None = None) -> Callable[[str], int]:
    """An argparse type: an integer within ``BOUNDS[name]`` (default: the flag's name)."""
    key = name or flag.lstrip("-")

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            lo, hi = BOUNDS[key]
            raise argparse.ArgumentTypeError(
                f"invalid int value: {_got(repr(text))}; {flag} takes an integer from "
                f"{_num(lo)} to {_num(hi)}") from None
        return int(bounded(flag, value, key))

    parse.__name__ = "int"
    return parse


def real(flag: str, name: str | None = None, *, open_low: bool = False
         ) -> Callable[[str], float]:
    """An argparse type: a finite number within ``BOUNDS[name]`` (``open_low``: above the
    lowest, not equal to it)."""
    key = name or flag.lstrip("-")

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            lo, hi = BOUNDS[key]
            raise argparse.ArgumentTypeError(
                f"invalid float value: {_got(repr(text))}; {flag} takes a number from "
                f"{_num(lo)} to {_num(hi)}") from None
        return float(bounded(flag, value, key, open_low=open_low))

    parse.__name__ = "float"
    return parse


def dims(flag: str, pairs: dict[str, str]) -> dict[str, int]:
    """``{"n": "4096", ...}`` from ``flag`` as workload dimensions, each an integer within
    ``BOUNDS["dim"]``; raises :class:`AutoschedError` naming the dimension."""
    from sim.errors import AutoschedError

    out: dict[str, int] = {}
    for k, v in pairs.items():
        try:
            out[k] = int(v)
        except ValueError:
            raise AutoschedError(f"{flag} {k}={_got(v)}: dims are integers") from None
        try:
            bounded(f"{flag} {k}", out[k], "dim")
        except argparse.ArgumentTypeError as e:
            raise AutoschedError(str(e)) from None
    return out
