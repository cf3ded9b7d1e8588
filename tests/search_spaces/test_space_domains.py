"""Domains: enumeration, strict membership, feature encoding."""

import numpy as np
import pytest

from search_spaces import Categorical, Divisors, IntRange, PowersOfTwo, SpaceError


def test_values_of_each_domain() -> None:
    assert Categorical(("nk", "kn")).values() == ("nk", "kn")
    assert IntRange(2, 10, step=4).values() == (2, 6, 10)
    assert PowersOfTwo(3, 40).values() == (4, 8, 16, 32)
    assert Divisors(12).values() == (1, 2, 3, 4, 6, 12)
    assert Divisors(12, lo=2, hi=6).values() == (2, 3, 4, 6)
    assert Divisors(4096, hi=64).values() == (1, 2, 4, 8, 16, 32, 64)
    assert len(Divisors(36)) == 9


@pytest.mark.parametrize("n", [1, 2, 7, 36, 97, 360, 1024])
def test_divisors_match_brute_force(n: int) -> None:
    assert Divisors(n).values() == tuple(d for d in range(1, n + 1) if n % d == 0)


def test_contains_is_strict_about_types() -> None:
    assert IntRange(0, 4).contains(1) and not IntRange(0, 4).contains(True)
    assert not IntRange(0, 4).contains(1.0) and not IntRange(0, 4).contains("1")
    assert not IntRange(0, 8, step=2).contains(3) and IntRange(0, 8, step=2).contains(np.int64(4))
    assert Categorical((False, True)).contains(True) and not Categorical((False, True)).contains(1)
    assert Categorical((1, 2)).contains(1) and not Categorical((1, 2)).contains(True)
    assert not PowersOfTwo(1, 64).contains(48) and PowersOfTwo(1, 64).contains(64)
    assert not Divisors(12).contains(5) and not Divisors(12, hi=4).contains(6)


def test_encoding_and_feature_names() -> None:
    cat = Categorical(("a", "b", "c"))
    assert cat.width == 3 and cat.encode("b") == (0.0, 1.0, 0.0)
    assert cat.encode(None) == (-1.0, -1.0, -1.0)
    assert cat.feature_names("order") == ("order=a", "order=b", "order=c")
    assert Divisors(12).encode(6) == (6.0,) and Divisors(12).encode(None) == (-1.0,)


@pytest.mark.parametrize("make", [
    lambda: Categorical(()),
    lambda: Categorical((1, True)),
    lambda: Categorical(("a", "a")),
    lambda: Categorical((1.5,)),
    lambda: IntRange(5, 1),
    lambda: IntRange(0, 10, step=3),
    lambda: IntRange(0, 10, log=True),
    lambda: IntRange(1, 10, step=3, log=True),
    lambda: PowersOfTwo(5, 7),
    lambda: PowersOfTwo(0, 8),
    lambda: Divisors(0),
    lambda: Divisors(12, lo=5, hi=5),
])
def test_malformed_domains_raise(make) -> None:
    with pytest.raises(SpaceError):
        make()


def test_step_error_says_what_to_use() -> None:
    with pytest.raises(SpaceError, match="use hi=9"):
        IntRange(0, 10, step=3)


def test_domains_are_hashable_values() -> None:
    assert {Divisors(12), Divisors(12), PowersOfTwo(1, 4)} == {Divisors(12), PowersOfTwo(1, 4)}
    assert Categorical(["x", "y"]) == Categorical(("x", "y"))
