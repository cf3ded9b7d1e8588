"""The schedule: one point of a named, versioned space, as a frozen hashable value.

A schedule does not validate itself (a failed candidate is still recorded); validate it
against its space with ``space.check(schedule.point)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from search_spaces.domains import Value, norm
from search_spaces.errors import ScheduleError
from search_spaces.params import check_name

if TYPE_CHECKING:
    from search_spaces.space import Space

__all__ = ["Schedule"]


_PLAIN = (int, str, bool)
_TEXTS: dict[str, str] = {}  # json.dumps of the string values seen (a space has few)


def _name_of(pair: tuple[Any, Any]) -> str:
    return pair[0] if type(pair[0]) is str else str(pair[0])


def _text(v: Value) -> str:
    """``json.dumps(v)`` for the value types a schedule holds, without the encoder's cost."""
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is int:
        return str(v)
    text = _TEXTS.get(v)  # type: ignore[arg-type]
    if text is None:
        text = json.dumps(v)
        if len(_TEXTS) < 4096:
            _TEXTS[v] = text  # type: ignore[index]
    return text


@dataclass(frozen=True)
class Schedule:
    """``space`` name and ``version``, and the decisions as name-sorted (name, value) pairs."""

    space: str
    version: int
    params: tuple[tuple[str, Value], ...]

    def __post_init__(self) -> None:
        if not isinstance(self.space, str) or type(self.version) is not int:
            raise ScheduleError(f"a schedule needs a space name and an int version, got "
                                f"{self.space!r} v{self.version!r}")
        try:
            pairs = tuple(sorted(((k, v if type(v) in _PLAIN else norm(v))
                                  for k, v in self.params), key=_name_of))
        except (TypeError, ValueError):
            raise ScheduleError(f"schedule for {self.space}: params must be (name, value) pairs, "
                                f"got {self.params!r}") from None
        names = [k for k, _ in pairs]
        if len(set(names)) != len(names):
            raise ScheduleError(f"schedule for {self.space}: parameter names repeat: {names}")
        texts = []
        for k, v in pairs:
            check_name(k, "schedule parameter", ScheduleError)
            if type(v) not in _PLAIN:
                raise ScheduleError(f"schedule for {self.space}: {k}={v!r} must be an int, "
                                    "str or bool")
            texts.append(f"{k}={_text(v)}")
        object.__setattr__(self, "params", pairs)
        body = ",".join(texts)
        object.__setattr__(self, "_key", f"{self.space}@v{self.version}:{body}")

    def __eq__(self, other: object) -> bool:
        # Tuple equality would take True for 1; compare the typed key instead.
        return isinstance(other, Schedule) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    @classmethod
    def of(cls, space: Space, point: dict[str, Any]) -> Schedule:
        """The schedule of ``point`` in ``space`` (not validated: see ``space.check``)."""
        return cls(space.name, space.version, tuple(point.items()))

    @property
    def point(self) -> dict[str, Value]:
        """The decisions as a dict, ready for the space's methods."""
        return dict(self.params)

    @property
    def key(self) -> str:
        """Stable text key, e.g. ``gemv@v1:double_buffer=true,order="nk",tile=64``."""
        return self._key

    @staticmethod
    def key_of(space: Space, point: dict[str, Any]) -> str:
        """``Schedule.of(space, point).key`` without building the schedule, for a point
        whose names and values are already valid (e.g. drawn from the space itself)."""
        body = ",".join(f"{k}={_text(v if type(v) in _PLAIN else norm(v))}"
                        for k, v in sorted(point.items()))
        return f"{space.name}@v{space.version}:{body}"

    def to_dict(self) -> dict:
        return {"space": self.space, "version": self.version, "params": dict(self.params)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> Schedule:
        """Inverse of :meth:`to_dict`; raises :class:`ScheduleError` on a malformed dict."""
        try:
            return cls(d["space"], d["version"], tuple(d["params"].items()))
        except (KeyError, TypeError, AttributeError) as e:
            raise ScheduleError(f"a schedule dict needs space, version and a params dict; "
                                f"got {d!r} ({e})") from None

    @classmethod
    def from_json(cls, text: str) -> Schedule:
        return cls.from_dict(json.loads(text))
