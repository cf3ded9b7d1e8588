"""The input layer: every file the project reads is read here, one way.

* :func:`read_bytes` opens a regular file only (a folder, device, FIFO or socket is
  refused without blocking on it), refuses one larger than its limit unread, and, given a
  ``folder``, takes a name relative to it that cannot leave it (no absolute path, no
  ``..``; a symlink placed inside the folder is followed, as the Hugging Face cache makes
  them).
* :func:`load_yaml` parses safe YAML (no Python tags) nested at most :data:`MAX_DEPTH`
  deep and refuses every alias (``*name``): an alias is never expanded, so a message can
  never print an expanded value.
* :func:`load_json` parses JSON nested at most :data:`MAX_DEPTH` deep whose numbers are
  finite (``NaN``, ``Infinity`` and ``1e999`` are refused) and integers of at most 19
  digits.

Numbers are then typed and bounded field by field by each file's own validator, which
names the field; :func:`shown` keeps any value a message quotes short. Every error is
one line of ``error`` (the caller's :class:`AutoschedError` subclass) naming the file.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path, PurePosixPath

import numpy as np
import yaml

from .errors import AutoschedError

__all__ = ["MAX_DEPTH", "InputError", "confined", "cut", "json_depth", "load_json", "load_yaml",
           "parse_json", "read_bytes", "read_text", "shown"]

MAX_DEPTH = 64  # nesting of any file the project reads (its own use at most 6)
_MAX_INT = 10**19  # one more digit than any count, size or identifier a file holds
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.S)  # a JSON string literal


class InputError(AutoschedError):
    """A file cannot be read as the input it should be."""


def shown(value: object, width: int = 60) -> str:
    """``repr(value)`` cut to ``width`` characters (a message never quotes a whole file)."""
    text = repr(value)
    return text if len(text) <= width else f"{text[:width - 14]}... ({len(text):,} chars)"


def cut(text: str, width: int = 160) -> str:
    """``text`` on one line, at most ``width`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def confined(folder: str | Path, name: str, *, what: str = "file",
             error: type[AutoschedError] = InputError) -> Path:
    """``folder / name`` for a relative ``name`` that stays inside ``folder``."""
    if not isinstance(name, str) or not name or "\x00" in name or "\\" in name:
        raise error(f"{folder}: {what} name {shown(name)} is not a file name")
    parts = PurePosixPath(name).parts
    if PurePosixPath(name).is_absolute() or ".." in parts:
        raise error(f"{folder}: {what} {shown(name)} is outside the folder (only names "
                    "inside it are read)")
    return Path(folder, *parts)


def read_bytes(path: str | Path, *, limit: int, what: str = "file",
               error: type[AutoschedError] = InputError) -> bytes:
    """The content of the regular file ``path``, at most ``limit`` bytes."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"{p}: no such {what}") from None
    except OSError as e:
        raise error(f"{p}: cannot be read ({e.strerror or e})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
        os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{p} is {_kind(st.st_mode)}; a {what} is a regular file")
        raise error(f"{p}: larger than {limit:,} bytes ({st.st_size:,}); a {what} is at "
                    f"most {limit:,} bytes (not parsed)")
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise error(f"{p}: cannot be read ({e.strerror or e})") from None
    if len(data) > limit:
        raise error(f"{p} grew past {limit:,} bytes while being read (not parsed)")
    return data


def read_text(path: str | Path, *, limit: int, what: str = "file",
              error: type[AutoschedError] = InputError) -> str:
    """:func:`read_bytes` decoded as UTF-8."""
    try:
        return read_bytes(path, limit=limit, what=what, error=error).decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: not a text (UTF-8) file") from None


def _yaml_events(text: str) -> None:
    """Raise ValueError for an alias or nesting deeper than MAX_DEPTH (events only: nothing
    is built or expanded)."""
    depth = 0
    for ev in yaml.parse(text, Loader=_LOADER):
        if isinstance(ev, yaml.AliasEvent):
            raise ValueError(f"line {ev.start_mark.line + 1}: alias *{shown(ev.anchor, 30)} "
                             "(YAML aliases are not accepted: write the value out)")
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise ValueError(f"line {ev.start_mark.line + 1}: nested deeper than "
                                 f"{MAX_DEPTH} levels")
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: str | Path, *, limit: int, what: str = "YAML file",
              error: type[AutoschedError] = InputError) -> object:
    """The safe-YAML content of ``path`` (see the module docstring)."""
    text = read_text(path, limit=limit, what=what, error=error)
    try:
        _yaml_events(text)
        return yaml.load(text, Loader=_LOADER)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as e:
        raise error(f"{path}: not valid YAML ({cut(str(e))})") from None
    except ValueError as e:  # an alias, too deep, or an integer of thousands of digits
        raise error(f"{path}: refused: {cut(str(e))}") from None


def _finite(text: str) -> float:
    x = float(text)
    if not np.isfinite(x):
        raise ValueError(f"number {shown(text, 30)} is beyond the float range")
    return x


def _bounded(text: str) -> int:
    if len(text) > 20 or abs(int(text)) >= _MAX_INT:
        raise ValueError(f"integer of {len(text.lstrip('-'))} digits (at most 19 accepted)")
    return int(text)


def _constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _nan_only(name: str) -> float:
    if name == "NaN":
        return float("nan")
    return _constant(name)


def json_depth(text: str) -> int:
    """How deep the arrays and objects of the JSON ``text`` nest (strings skipped)."""
    b = np.frombuffer(_STRING.sub("", text).encode(), dtype=np.uint8)
    step = np.isin(b, (0x5B, 0x7B)).astype(np.int32) - np.isin(b, (0x5D, 0x7D))
    return int(np.cumsum(step).max(initial=0))


def parse_json(text: str, *, source: str, error: type[AutoschedError] = InputError,
               nan: bool = False) -> object:
    """JSON ``text`` (from ``source``, named in errors) under the rules of :func:`load_json`
    (``nan``: ``NaN`` stands for a figure that does not exist, as in the project's own
    result files)."""
    if text.count("[") + text.count("{") > MAX_DEPTH and json_depth(text) > MAX_DEPTH:
        raise error(f"{source}: refused: nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_float=_finite, parse_int=_bounded,
                          parse_constant=_nan_only if nan else _constant)
    except json.JSONDecodeError as e:
        raise error(f"{source} is not valid JSON ({e.msg} at line {e.lineno} column "
                    f"{e.colno})") from None
    except ValueError as e:
        raise error(f"{source}: refused: {cut(str(e))}") from None


def load_json(path: str | Path, *, limit: int, what: str = "JSON file",
              error: type[AutoschedError] = InputError, nan: bool = False) -> object:
    """The JSON content of ``path`` (see the module docstring and :func:`parse_json`)."""
    return parse_json(read_text(path, limit=limit, what=what, error=error), source=str(path),
                      error=error, nan=nan)
