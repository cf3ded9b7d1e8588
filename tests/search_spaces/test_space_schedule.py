"""Schedule: construction from a point, JSON round trip, hashing, key, validation."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from search_spaces import (
    Categorical,
    Cond,
    Divisors,
    Param,
    Schedule,
    ScheduleError,
    Space,
)


def space() -> Space:
    return Space("ew", 2, (
        Param("placement", Categorical(("pim", "host"))),
        Param("split", Divisors(16), when=Cond("placement", "pim")),
        Param("fuse", Categorical((False, True))),
    ))


def test_of_sorts_and_exposes_point() -> None:
    s = space()
    sch = Schedule.of(s, {"split": 4, "placement": "pim", "fuse": True})
    assert sch.space == "ew" and sch.version == 2
    assert sch.params == (("fuse", True), ("placement", "pim"), ("split", 4))
    assert sch.point == {"fuse": True, "placement": "pim", "split": 4}
    s.check(sch.point)


def test_json_round_trip_and_key() -> None:
    sch = Schedule.of(space(), {"placement": "pim", "split": 8, "fuse": False})
    assert Schedule.from_json(sch.to_json()) == sch
    assert Schedule.from_dict(json.loads(json.dumps(sch.to_dict()))) == sch
    assert sch.key == 'ew@v2:fuse=false,placement="pim",split=8'
    assert json.loads(sch.to_json()) == {"space": "ew", "version": 2,
                                         "params": {"fuse": False, "placement": "pim", "split": 8}}


def test_hash_and_equality_tell_bool_from_int() -> None:
    a = Schedule("s", 1, (("x", 1),))
    b = Schedule("s", 1, (("x", True),))
    assert a != b and a.key != b.key
    assert len({a, b, Schedule("s", 1, (("x", 1),))}) == 2
    assert Schedule("s", 1, (("x", 1),)) != Schedule("s", 2, (("x", 1),))


def test_params_must_be_pairs() -> None:
    with pytest.raises(ScheduleError, match="pairs"):
        Schedule("s", 1, {"x": 1})  # type: ignore[arg-type]


def test_invalid_schedule_is_reported_by_its_space() -> None:
    sch = Schedule.of(space(), {"placement": "host", "split": 4, "fuse": True})
    with pytest.raises(ScheduleError, match="split is given but inactive"):
        space().check(sch.point)


@pytest.mark.parametrize("bad", [
    {"space": "s", "version": 1},
    {"space": "s", "version": "1", "params": {}},
    {"space": "s", "version": 1, "params": {"x": 1.5}},
    {"space": "s", "version": 1, "params": {"bad name": 1}},
    {"space": "s", "version": 1, "params": []},
])
def test_malformed_dicts_raise(bad: dict) -> None:
    with pytest.raises(ScheduleError):
        Schedule.from_dict(bad)


VALUES = st.one_of(st.integers(-10**9, 10**9), st.booleans(), st.text(max_size=8))


@given(st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), VALUES,
                       max_size=6))
def test_property_json_round_trip(params: dict) -> None:
    sch = Schedule("any", 3, tuple(params.items()))
    back = Schedule.from_json(sch.to_json())
    assert back == sch and back.key == sch.key and hash(back) == hash(sch)
    assert back.point == params and all(type(back.point[k]) is type(v) for k, v in params.items())


@given(st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), VALUES,
                       max_size=6))
def test_property_key_of_is_the_key_of_the_schedule(params: dict) -> None:
    s = Space("any", 3, ())
    # the text key is json's spelling of every value, bools and strings included
    body = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(params.items()))
    assert Schedule.key_of(s, params) == Schedule.of(s, params).key == f"any@v3:{body}"
