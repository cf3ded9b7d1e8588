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
            pairs = tuple(sorted(((k, norm(v)) for k, v in self.params), key=lambda kv: str(kv[0])))
        except (TypeError, ValueError):
            raise ScheduleError(f"schedule for {self.space}: params must be (name, value) pairs, "
                                f"got {self.params!r}") from None
        names = [k for k, _ in pairs]
        if len(set(names)) != len(names):
            raise ScheduleError(f"schedule for {self.space}: parameter names repeat: {names}")
        for k, v in pairs:
            check_name(k, "schedule parameter", ScheduleError)
            if type(v) not in (int, str, bool):
                raise ScheduleError(f"schedule for {self.space}: {k}={v!r} must be an int, "
                                    "str or bool")
        object.__setattr__(self, "params", pairs)

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
        body = ",".join(f"{k}={json.dumps(v)}" for k, v in self.params)
        return f"{self.space}@v{self.version}:{body}"

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
