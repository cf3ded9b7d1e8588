"""Space: conditions, validation reasons, exact size, enumeration against brute force,
sampling, features and digest."""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search_spaces import (
    Categorical,
    Cond,
    Constraint,
    Divisors,
    IntRange,
    Param,
    PowersOfTwo,
    ScheduleError,
    Space,
    SpaceError,
    Var,
)

ABSENT = object()


def gemv_like() -> Space:
    """A small space with a three-level condition chain and two constraints."""
    return Space("gemv_like", 1, (
        Param("placement", Categorical(("pim", "host"))),
        Param("gb_tile", PowersOfTwo(16, 256), when=Cond("placement", "pim")),
        Param("batch", Divisors(8), when=Cond("placement", "pim")),
        Param("dbuf", Categorical((False, True)), when=Cond("placement", "pim")),
        Param("depth", IntRange(2, 4), when=Cond("dbuf", True)),
        Param("prefetch", Categorical(("row", "col")), when=Cond("depth", (3, 4))),
        Param("threads", IntRange(1, 3), when=Cond("placement", "host")),
    ), (
        Constraint("gb_fits", Var("gb_tile") * Var("batch") * (1 + Var("dbuf")), "<=", 512,
                   "{expr}={lhs} elements exceeds the global buffer ({rhs})"),
        Constraint("deep_tiles", Var("gb_tile") * Var("depth"), "<=", 512,
                   when=Cond("prefetch", "row")),
    ))


def brute_force(space: Space, with_constraints: bool = True) -> list[dict]:
    """All dicts over (values or absent) per parameter that validate."""
    options = [list(p.domain.values()) + [ABSENT] for p in space.params]
    out = []
    for combo in itertools.product(*options):
        point = {p.name: v for p, v in zip(space.params, combo, strict=True) if v is not ABSENT}
        if not space.validate(point, constraints=with_constraints):
            out.append(point)
    return out


def key(point: dict) -> tuple:
    return tuple(sorted((k, type(v).__name__, v) for k, v in point.items()))


def test_active_follows_chains() -> None:
    s = gemv_like()
    assert s.active({"placement": "host"}) == ("placement", "threads")
    assert s.active({"placement": "pim", "dbuf": False}) == ("placement", "gb_tile", "batch",
                                                             "dbuf")
    assert s.active({"placement": "pim", "dbuf": True, "depth": 3})[-2:] == ("depth", "prefetch")
    assert "prefetch" not in s.active({"placement": "pim", "dbuf": True, "depth": 2})
    assert "prefetch" not in s.active({"placement": "host", "dbuf": True, "depth": 3})


def test_validate_lists_every_reason() -> None:
    s = gemv_like()
    reasons = s.validate({"placement": "pim", "gb_tile": 48, "dbuf": 1, "threads": 2, "x": 0})
    text = "\n".join(reasons)
    assert "unknown parameter 'x'" in text
    assert "gb_tile=48 is outside PowersOfTwo" in text
    assert "missing parameter batch" in text
    assert "dbuf=1 is outside" in text
    assert "threads is given but inactive: it exists only when placement='host'" in text
    assert len(reasons) == 5


def test_constraint_reasons_carry_values() -> None:
    s = gemv_like()
    point = {"placement": "pim", "gb_tile": 256, "batch": 4, "dbuf": True, "depth": 3,
             "prefetch": "row"}
    assert s.validate(point) == [
        "gb_fits: gb_tile*batch*(1+dbuf)=2048 elements exceeds the global buffer (512)",
        "deep_tiles: gb_tile*depth=768 must be <= 512",
    ]
    with pytest.raises(ScheduleError, match="gb_fits.*deep_tiles"):
        s.check(point)
    assert s.validate(point, constraints=False) == []
    assert s.validate([1]) == ["a point must be a dict, got list"]


def test_enumerate_equals_brute_force_and_size_is_exact() -> None:
    s = gemv_like()
    points = list(s.enumerate())
    assert [key(p) for p in points] == [key(p) for p in s.enumerate()]
    assert len({key(p) for p in points}) == len(points)
    assert {key(p) for p in points} == {key(p) for p in brute_force(s)}
    assert s.size() == len(brute_force(s, with_constraints=False)) == 3 + 5 * 4 * (1 + 1 + 2 * 2)
    assert points[0] == {"placement": "pim", "gb_tile": 16, "batch": 1, "dbuf": False}


def test_enumerate_limit() -> None:
    s = gemv_like()
    with pytest.raises(SpaceError, match="more than limit=10"):
        s.enumerate(limit=10)
    assert len(list(s.enumerate(limit=s.size()))) <= s.size()


def test_size_of_large_space_without_walking() -> None:
    s = Space("big", 0, tuple(Param(f"p{i}", IntRange(0, 999)) for i in range(6)))
    assert s.size() == 1000**6


def test_declaration_errors() -> None:
    a = Param("a", Categorical(("x", "y")))
    with pytest.raises(SpaceError, match="declared before"):
        Space("s", 1, (Param("b", IntRange(0, 3), when=Cond("a", "x")), a))
    with pytest.raises(SpaceError, match="outside"):
        Space("s", 1, (a, Param("b", IntRange(0, 3), when=Cond("a", "z"))))
    with pytest.raises(SpaceError, match="twice"):
        Space("s", 1, (a, a))
    with pytest.raises(SpaceError, match="not a numeric parameter"):
        Space("s", 1, (a,), (Constraint("c", Var("a"), "<", 2),))
    with pytest.raises(SpaceError, match="not a numeric parameter"):
        Space("s", 1, (a,), (Constraint("c", Var("zz"), "<", 2),))
    with pytest.raises(SpaceError, match="version"):
        Space("s", -1, (a,))


def test_features_fixed_length_and_deterministic() -> None:
    s = gemv_like()
    names = s.feature_names()
    assert names == ("placement=pim", "placement=host", "gb_tile", "batch", "dbuf=False",
                     "dbuf=True", "depth", "prefetch=row", "prefetch=col", "threads")
    vectors = [s.features(p) for p in s.enumerate()]
    assert {v.shape for v in vectors} == {(len(names),)}
    assert s.features({"placement": "host", "threads": 2}).tolist() == [
        0, 1, -1, -1, -1, -1, -1, -1, -1, 2]
    np.testing.assert_array_equal(s.features({"placement": "host", "threads": 2}),
                                  s.features({"threads": 2, "placement": "host"}))
    with pytest.raises(ScheduleError, match="missing parameter threads"):
        s.features({"placement": "host"})


def test_digest_tracks_structure_and_version() -> None:
    s = gemv_like()
    assert s.digest == gemv_like().digest and len(s.digest) == 16
    assert Space(s.name, 2, s.params, s.constraints).digest != s.digest
    assert Space(s.name, 1, s.params, s.constraints[:1]).digest != s.digest
    assert Space(s.name, 1, s.params[:-1], s.constraints).digest != s.digest
    assert hash(s) == hash(gemv_like()) and s == gemv_like()


def test_sample_is_seeded_and_valid() -> None:
    s = gemv_like()
    a = s.sample(np.random.default_rng(7), 50)
    assert a == s.sample(np.random.default_rng(7), 50)
    assert a != s.sample(np.random.default_rng(8), 50)
    assert all(not s.validate(p) for p in a)
    tight = Space("tight", 1, (Param("a", IntRange(0, 9)),), (Constraint("c", Var("a"), ">", 9),))
    with pytest.raises(SpaceError, match="only 0 of 1"):
        tight.sample(np.random.default_rng(0), 1, max_draws=20)
    assert list(tight.enumerate()) == []


def test_fill_builds_points_in_order() -> None:
    s = gemv_like()
    first = s.fill(lambda p: p.domain.values()[0])
    assert first == {"placement": "pim", "gb_tile": 16, "batch": 1, "dbuf": False}


# ------------------------------------------------------------------ property test
DOMAINS = st.one_of(
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True)
    .map(lambda c: Categorical(tuple(c))),
    st.integers(1, 4).map(lambda hi: IntRange(0, hi)),
    st.integers(1, 40).map(lambda n: Divisors(n)),
    st.integers(1, 16).map(lambda hi: PowersOfTwo(1, hi)),
    st.just(Categorical((False, True))),
)


@st.composite
def spaces(draw: st.DrawFn) -> Space:
    params: list[Param] = []
    for i in range(draw(st.integers(1, 4))):
        when = None
        if params and draw(st.booleans()):
            parent = draw(st.sampled_from(params))
            vals = draw(st.lists(st.sampled_from(parent.domain.values()), min_size=1,
                                 max_size=2, unique=True))
            when = Cond(parent.name, tuple(vals))
        params.append(Param(f"p{i}", draw(DOMAINS), when))
    numeric = [p.name for p in params if not isinstance(p.domain, Categorical)
               or p.domain.values() == (False, True)]
    constraints = []
    if numeric and draw(st.booleans()):
        a, b = draw(st.sampled_from(numeric)), draw(st.sampled_from(numeric))
        constraints.append(Constraint("c", Var(a) * Var(b) + 1, "<=", draw(st.integers(0, 30))))
    return Space("prop", 1, tuple(params), tuple(constraints))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spaces(), st.integers(0, 2**32 - 1))
def test_property_enumeration_matches_brute_force(space: Space, seed: int) -> None:
    enumerated = list(space.enumerate())
    assert all(space.validate(p) == [] for p in enumerated)
    assert {key(p) for p in enumerated} == {key(p) for p in brute_force(space)}
    assert space.size() == len(brute_force(space, with_constraints=False))
    if enumerated:
        keys = {key(p) for p in enumerated}
        assert all(key(p) in keys for p in space.sample(np.random.default_rng(seed), 10))
