"""System power: DRAM background, DRAM interface (PHY), PCIe idle and SSD idle terms of perf.energy."""
import pytest

from vrex_lib.estimate import constants as C
from vrex_lib.estimate import offchip as O
from vrex_lib.perf import energy as E
from vrex_lib.perf.systems import agx_orin, a100, vrex


def _idle(seconds: float = 1.0) -> E.StepCounts:
    return E.StepCounts(seconds=seconds, macs=0.0, dram_bytes=0.0, pcie_bytes=0.0, pcie_busy_s=0.0)


def test_new_rows_are_cited():
    for comp, act in [("dram_lpddr5", "background"), ("dram_hbm2e", "background"), ("dram_phy_lpddr5", "transfer"),
                      ("dram_phy_hbm2e", "transfer"), ("pcie_lane", "idle_fraction"), ("ssd", "idle")]:
        r = C.rows(comp, act)[0]
        assert r.source in C.SOURCES and r.source != "assumption" and r.note, r


@pytest.mark.parametrize("kind", ["lpddr5", "hbm2e"])
def test_dram_background_positive_and_grows_with_capacity(kind):
    p16, p32 = O.dram_background_w(kind, 16e9), O.dram_background_w(kind, 32e9)
    assert 0 < p16 < p32 and p32 == pytest.approx(2 * p16)
    assert O.dram_background_w(kind, 0) == 0
    with pytest.raises(ValueError, match="capacity"):
        O.dram_background_w(kind, -1)
    with pytest.raises(ValueError, match="gddr6"):
        O.dram_background_w("gddr6", 1e9)


def test_phy_and_pcie_idle():
    assert O.dram_phy_pj_per_bit("lpddr5") > 0 and O.dram_phy_pj_per_bit("HBM2e") > 0
    assert 0 < O.pcie_power_w(4, "idle") <= O.pcie_power_w(4) < O.pcie_power_w(16)
    with pytest.raises(ValueError):
        O.pcie_power_w(4, "sleep")


@pytest.mark.parametrize("side,n", [("edge", 8), ("server", 48)])
def test_idle_vrex_still_draws_background_power(side, n):
    sys = vrex(n, side)
    j, parts = E.step_energy(sys, _idle())
    assert parts["dram_background"] > 0 and parts["pcie_idle"] > 0 and parts["core"] > 0
    assert parts["dram"] == 0 and parts["dram_phy"] == 0 and parts["pcie"] == 0
    assert j == pytest.approx(sum(parts.values())) and j > 1.0  # > 1 W with nothing moving
    if side == "edge":
        assert parts["ssd"] == pytest.approx(O.ssd_power_w("idle"))


def test_power_grows_with_capacity_and_traffic():
    sys = vrex(8, "edge")
    base = E.step_energy(sys, _idle())[0]
    assert E.step_energy(sys.replace(dram_capacity=2 * sys.dram_capacity), _idle())[0] > base
    busy = E.StepCounts(seconds=1.0, macs=0.0, dram_bytes=100e9, pcie_bytes=0.0, pcie_busy_s=0.0)
    j, parts = E.step_energy(sys, busy)
    assert j > base and parts["dram_phy"] > 0
    # PCIe busy vs idle: never less power while moving data
    moving = E.StepCounts(seconds=1.0, macs=0.0, dram_bytes=0.0, pcie_bytes=3e9, pcie_busy_s=1.0)
    assert E.step_energy(sys, moving)[0] >= base


@pytest.mark.parametrize("gpu", [agx_orin, a100])
def test_gpu_gets_pcie_idle_but_no_extra_dram_terms(gpu):
    sys = gpu()
    j, parts = E.step_energy(sys, _idle())
    assert "dram_background" not in parts and "dram_phy" not in parts  # inside Table I board power
    assert parts["gpu_board"] == pytest.approx(sys.power_w) and parts["pcie_idle"] > 0


def test_pcie_power_scales_with_link_use_from_3w_per_lane():
    sys = vrex(8, "edge")  # 4 lanes (Table I)
    idle = O.pcie_idle_fraction()
    assert E.pcie_power_w(sys, 1.0) == pytest.approx(4 * 3.0)
    assert E.pcie_power_w(sys, 0.0) == pytest.approx(4 * 3.0 * idle)
    assert E.pcie_power_w(sys, 0.25) == pytest.approx(4 * 3.0 * (0.25 + 0.75 * idle))
    with pytest.raises(ValueError):
        E.pcie_power_w(sys, 1.5)


def test_peak_power_is_the_sum_of_full_load_parts():
    sys = vrex(8, "edge")
    pk = E.peak_power_w(sys)
    assert pk["core"] == pytest.approx(8 * sys.core_power.peak_w)
    assert pk["dram"] == pytest.approx(sys.dram * 8 * O.dram_pj_per_bit("lpddr5") * 1e-12)
    assert pk["ssd"] == O.ssd_power_w("active") and pk["pcie"] == pytest.approx(12.0)
    assert pk["total"] == pytest.approx(sum(v for k, v in pk.items() if k != "total"))
