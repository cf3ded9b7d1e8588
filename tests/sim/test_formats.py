"""Weight formats: names, bytes, RTN quantization, int4 packing, and the hardware's
integer-format units (validation, column times, the Mac over denser columns)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from sim.errors import AutoschedError, HardwareError
from sim.formats import (
    WeightFormat,
    dequantize,
    pack_int32,
    quantize_rtn,
    unpack_int32,
    weight_format,
)
from sim.hwio import list_presets, list_variants, load_hardware


def test_names_round_trip_and_bytes() -> None:
    for name in ("w8", "w8g128", "w4g128", "w4g32a"):
        assert weight_format(name).name == name
    assert weight_format("fp16") == WeightFormat(16)
    for bad in ("w4", "w3g128", "w4g100", "int4"):
        with pytest.raises(AutoschedError):
            weight_format(bad)
    # 4096 x 4096 int4, group 128: 8 MiB codes + 4096 x 32 fp16 scales
    assert weight_format("w4g128").weight_bytes(4096, 4096) == 4096 * 2048 + 4096 * 32 * 2
    assert weight_format("w4g128a").weight_bytes(4096, 4096) == \
        4096 * 2048 + 4096 * 32 * 2 + 4096 * 32 // 2
    assert weight_format("w8").weight_bytes(8, 64) == 8 * 64 + 8 * 2


@pytest.mark.parametrize("name", ["w8", "w4g32", "w4g64a", "w8g128a"])
def test_rtn_error_within_half_a_step(name: str) -> None:
    fmt = weight_format(name)
    w = np.random.default_rng(0).standard_normal((16, 256)).astype(np.float32)
    qw = quantize_rtn(w, fmt, "fp32")
    assert qw.q.min() >= fmt.qmin and qw.q.max() <= fmt.qmax
    err = np.abs(dequantize(qw, "fp32") - w).reshape(16, -1, fmt.group or 256)
    assert (err <= qw.scale[..., None] * 0.5 + 1e-6).all()


@pytest.mark.parametrize("bits,axis", [(4, 1), (8, 1), (4, 0)])
def test_pack_unpack(bits: int, axis: int) -> None:
    rng = np.random.default_rng(1)
    q = rng.integers(-(1 << bits - 1), 1 << bits - 1, (16, 24)).astype(np.int8)
    packed = pack_int32(q, bits, axis)
    assert packed.dtype == np.int32 and packed.shape[axis] == 24 // (32 // bits) * (axis == 1) + \
        16 // (32 // bits) * (axis == 0)
    assert (unpack_int32(packed, bits, q.shape[axis], axis) == q).all()


def test_packing_matches_compressed_tensors() -> None:
    torch = pytest.importorskip("torch")
    helpers = pytest.importorskip("compressed_tensors.compressors.pack_quantized.helpers")
    q = np.random.default_rng(2).integers(-8, 8, (8, 32)).astype(np.int8)
    theirs = helpers.pack_to_int32(torch.from_numpy(q), 4, 1).numpy()
    assert (pack_int32(q, 4) == theirs).all()


def test_variants_load_and_old_files_stay_float() -> None:
    assert set(list_variants()) >= {"aim-gddr6-int4", "aim-gddr6-int8", "hbm-pim-int8"}
    assert not set(list_variants()) & set(list_presets())
    aim, aim4 = load_hardware("aim-gddr6"), load_hardware("aim-gddr6-int4")
    assert not aim.takes("int8") and "formats" not in aim.to_dict()
    assert aim4.takes("int4") and aim4.density("int4") == 4
    # 64 lanes eat a 32 B column of int4 in one 1 ns unit cycle: as fast as a bf16 column
    assert aim4.format_column_ns("int4") == pytest.approx(aim.pim_column_ns)
    assert load_hardware(aim4.to_dict()) == aim4


@pytest.mark.parametrize("change,field", [
    ({"weights": ["int2"]}, "formats.weights"),
    ({"int4_lanes": 24}, "formats.int4_lanes"),
    ({"group_sizes": [100]}, "formats.group_sizes"),
    ({"group_sizes": []}, "formats.group_sizes"),
    ({"dequant": "host"}, "formats.dequant"),
])
def test_formats_rules(change: dict, field: str) -> None:
    d = copy.deepcopy(load_hardware("aim-gddr6-int4").to_dict())
    d["formats"].update(change)
    with pytest.raises(HardwareError, match=field):
        load_hardware(d)


def test_formats_need_an_adder_tree() -> None:
    d = copy.deepcopy(load_hardware("aim-gddr6-int4").to_dict())
    d["pim"]["adder_tree"] = False
    with pytest.raises(HardwareError, match="adder_tree"):
        load_hardware(d)


def test_a_format_mac_is_refused_where_the_units_do_not_take_it() -> None:
    from sim.isa import Act, Mac, Pre
    from sim.program import Buffer, Program, Stream
    from sim.validate import validate

    mac = Mac(0, 1, 0, 1, 0, 0, "dot", 0, "int4")
    prog = Program((Stream("pim", "pim", (0,), (Act(0, 1, 0), mac, Pre(0, 1))),),
                   (Buffer("x", "bf16", 64),))
    validate(prog, load_hardware("aim-gddr6-int4"))
    with pytest.raises(AutoschedError, match="do not take int4"):
        validate(prog, load_hardware("aim-gddr6"))
    assert '"fmt"' not in Program(prog.streams[:0] + (Stream("pim", "pim", (0,), (
        Act(0, 1, 0), Mac(0, 1, 0, 1, 0, 0, "dot", 0), Pre(0, 1))),), prog.buffers).to_json()
