"""Stillmaker-Baas scaling reproduces the factors published in Stillmaker & Baas (2017) to two digits."""
import pytest

from vrex_lib.estimate.scaling import area_factor, energy_factor, relative_energy


@pytest.mark.parametrize("src,dst,energy,area", [
    (45, 16, 0.174, 0.19),
    (45, 28, 0.513, 0.377),
    (45, 7, 0.094, 0.059),
])
def test_published_factors_at_0v8(src, dst, energy, area):
    assert energy_factor(src, 0.8, dst, 0.8) == pytest.approx(energy, abs=0.005)
    assert area_factor(src, dst) == pytest.approx(area, abs=0.005)


def test_65_to_45_energy():
    assert energy_factor(65, 0.8, 45, 0.8) == pytest.approx(0.81, abs=0.005)


def test_identity_and_inverse():
    assert energy_factor(14, 0.8, 14, 0.8) == pytest.approx(1.0)
    assert area_factor(14, 14) == pytest.approx(1.0)
    assert energy_factor(45, 0.9) * energy_factor(14, 0.8, 45, 0.9) == pytest.approx(1.0)


def test_lower_voltage_lowers_energy():
    assert relative_energy(14, 0.7) < relative_energy(14, 0.8) < relative_energy(14, 0.9)


def test_out_of_range_node_is_an_error():
    with pytest.raises(ValueError, match="outside"):
        energy_factor(3, 0.8)
