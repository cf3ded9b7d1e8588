"""round_to against torch's own fp16 / bf16 conversions (round to nearest, ties to even)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sim.errors import AutoschedError
from sim.functional import round_to

SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 65504.0, 65520.0,
                     1e-40, 6e-8, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-11], np.float32)
TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16}


def reference(x: np.ndarray, dtype: str) -> np.ndarray:
    return torch.from_numpy(x).to(TORCH[dtype]).float().numpy()


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_specials_match_torch(dtype: str) -> None:
    out = round_to(SPECIALS, dtype)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, reference(SPECIALS, dtype))


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@given(x=arrays(np.float32, st.integers(1, 64), elements=st.floats(width=32)))
def test_random_values_match_torch(dtype: str, x: np.ndarray) -> None:
    np.testing.assert_array_equal(round_to(x, dtype), reference(x, dtype))


def test_bf16_ties_go_to_even() -> None:
    # 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: the even neighbour is 1.
    # 1 + 3*2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: the even neighbour is 1 + 2^-6.
    out = round_to(np.array([1 + 2.0**-8, 1 + 3 * 2.0**-8], np.float32), "bf16")
    np.testing.assert_array_equal(out, [1.0, 1 + 2.0**-6])


def test_fp32_is_identity_and_input_untouched() -> None:
    x = np.array([1 + 2.0**-20, np.pi], np.float32)
    keep = x.copy()
    out = round_to(x, "fp32")
    out[0] = 0
    np.testing.assert_array_equal(x, keep)
    np.testing.assert_array_equal(round_to(x, "bf16")[1], np.float32(3.140625))
    np.testing.assert_array_equal(x, keep)


def test_unknown_dtype_is_rejected() -> None:
    with pytest.raises(AutoschedError, match="unknown dtype 'int8'"):
        round_to(np.zeros(2, np.float32), "int8")
