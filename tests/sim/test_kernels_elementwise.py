"""In-bank element-wise kernels and the plain-memory baseline against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from sim.errors import AutoschedError
from sim.functional import round_to
from sim.hwio import load_hardware
from sim.kernels import BINARY_FNS, elementwise, gemv_baseline

HW = {name: load_hardware(name) for name in ("hbm-pim", "aim-gddr6")}
# Unit roundoff of the bank dtype: the only rounding is of the result, once, to the bank
# dtype (an fp16 accumulator rounds to the same fp16 value; fp32 accumulators hold the
# float32 result, which WrAcc rounds to bf16). Inputs are rounded before the reference.
UNIT = {"fp16": 2.0**-11, "bf16": 2.0**-8}
REF = {
    "add": lambda x, y: x + y, "mul": lambda x, y: x * y,
    "relu": lambda x: np.maximum(x, 0), "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3))),
}
CASES = [(name, fn) for name, hw in HW.items() for fn in (*BINARY_FNS,
                                                           *hw.pim.activation_functions)]


@pytest.mark.parametrize("name,fn", CASES)
@pytest.mark.parametrize("n", [1, 1000, 70_001])
def test_elementwise_matches_numpy(name, fn, n):
    hw = HW[name]
    dt = hw.pim.dtype
    rng = np.random.default_rng(n)
    x = round_to(rng.uniform(-3, 3, n).astype(np.float32), dt).astype(np.float64)
    y = round_to(rng.uniform(-3, 3, n).astype(np.float32), dt).astype(np.float64)
    kern = elementwise(hw, n, fn)
    tensors = {"x": x, "y": y} if fn in BINARY_FNS else {"x": x}
    got = kern.run(hw, tensors)
    ref = REF[fn](x, y) if fn in BINARY_FNS else REF[fn](x)
    # one rounding to the bank dtype (u |ref|) plus float32 evaluation of f (1e-6)
    np.testing.assert_allclose(got, ref, rtol=UNIT[dt], atol=1e-6)


def test_elementwise_rejects_unknown_function():
    with pytest.raises(AutoschedError, match="not available"):
        elementwise(HW["hbm-pim"], 10, "gelu")


@pytest.mark.parametrize("hw", HW.values(), ids=HW.keys())
@pytest.mark.parametrize("n,k,batch", [(16, 16, 1), (97, 250, 2), (250, 97, 3), (300, 1000, 4)])
def test_baseline_matches_numpy(hw, n, k, batch):
    """Integer data in {-1, 0, 1}: exact in the bank dtype, and the host sums in float32."""
    rng = np.random.default_rng(3)
    x = rng.integers(-1, 2, (batch, k)).astype(np.float32)
    w = rng.integers(-1, 2, (n, k)).astype(np.float32)
    y = gemv_baseline(hw, n, k, batch).run(hw, {"x": x, "W": w})
    np.testing.assert_array_equal(y, x @ w.T)
