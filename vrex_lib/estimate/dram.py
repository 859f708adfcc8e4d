"""DRAM energy per bit = DRAM core (IDD model of a cited device) + interface (CACTI-IO), for LPDDR5 and DDR4.

* **Core**: the IDD energy model of DRAMsim3 (and Micron TN-41-01) on the device of
  :data:`~vrex_lib.estimate.constants.DRAM_DEVICES`: a read burst costs ``VDD (IDD4R - IDD3N) (BL/2) tCK``
  over ``width x BL`` bits (write: IDD4W), an activation ``VDD (IDD0 tRC - IDD3N tRAS - IDD2N tRP) tCK``;
  V x mA x ns = pJ. KV traffic streams whole rows (the KVMU's cluster-contiguous layout, docs/DECISIONS.md D85), so
  one activation serves one page: activation energy per bit = E_ACT / page bits (docs/DECISIONS.md D124).
* **Interface**: CACTI-IO (:func:`vrex_lib.estimate.cacti.run_io`) on the channel of
  :data:`~vrex_lib.estimate.constants.DRAM_INTERFACES`: I/O switching + termination/bias (the link, both ends) and
  the controller PHY, per bit moved, at random data (0.5 transitions per DQ per clock), reading.
* HBM2e: CACTI-IO has no HBM model; :func:`dram_energy` refuses it (the cited rows of
  :mod:`vrex_lib.estimate.offchip` remain its energy). The IDD core of the HBM2 device is available
  (:func:`core_pj_per_bit`) as a cross-check of those rows.

Background (standby + refresh) power stays :func:`vrex_lib.estimate.offchip.dram_background_w`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .. import memtech
from . import constants as C
from .cacti import IoSpec, run_io


def _device(kind: str) -> C.DramDevice:
    try:
        return C.DRAM_DEVICES[kind.lower()]
    except KeyError:
        raise ValueError(f"no DRAM device for kind {kind!r}: choose one of {sorted(C.DRAM_DEVICES)}") from None


def core_pj_per_bit(kind: str) -> dict[str, float]:
    """IDD-model core energies of ``kind``'s device, pJ per bit: 'read', 'write' (column bursts) and 'activate'
    (one activation per page, spread over the page's bits)."""
    d = _device(kind)
    burst_ns = d.burst_length / 2 * d.tck_ns
    bits = d.device_width * d.burst_length
    t_rc = d.t_ras + d.t_rp
    act_pj = d.vdd * (d.idd0 * t_rc - (d.idd3n * d.t_ras + d.idd2n * d.t_rp)) * d.tck_ns
    if act_pj <= 0:
        raise ValueError(f"DRAM device {d.name}: IDD0 x tRC does not exceed the standby currents; check its row")
    return dict(read=d.vdd * (d.idd4r - d.idd3n) * burst_ns / bits, write=d.vdd * (d.idd4w - d.idd3n) * burst_ns / bits,
                activate=act_pj / d.page_bits)


def interface_spec(kind: str, state: str = "READ") -> IoSpec:
    """The CACTI-IO channel of ``kind`` (its :mod:`vrex_lib.memtech` record); a kind without one is an error that
    gives the record's reason (HBM2e: CACTI-IO has no HBM interface model)."""
    m = memtech.dram(kind)
    i = m.cacti_io
    if i is None:
        raise ValueError(f"CACTI-IO models no interface for DRAM kind {m.name!r}: {m.cacti_io_none}")
    return IoSpec(i.io_type, i.bus_freq_mhz, i.num_dq, i.num_dqs, i.num_ca, i.device_width, num_clk=i.num_clk,
                  loads=i.loads, state=state)


@dataclass(frozen=True)
class DramEnergy:
    """Energy per bit read (pJ) of one DRAM kind, by part. ``device_pj_per_bit`` = core + the link (what a DRAM
    device's transfer energy includes); ``phy_pj_per_bit`` = the controller-side PHY."""

    kind: str
    core_read: float
    activate: float
    io_dynamic: float
    io_termination: float
    phy: float
    device: str
    interface: str

    @property
    def device_pj_per_bit(self) -> float:
        return self.core_read + self.activate + self.io_dynamic + self.io_termination

    @property
    def phy_pj_per_bit(self) -> float:
        return self.phy

    @property
    def total_pj_per_bit(self) -> float:
        return self.device_pj_per_bit + self.phy


def dram_energy(kind: str, *, cache_dir: str | os.PathLike | None = None) -> DramEnergy:
    """:class:`DramEnergy` of ``kind`` ('lpddr5' | 'ddr4'): IDD core of its device + CACTI-IO of its channel."""
    core = core_pj_per_bit(kind)
    spec = interface_spec(kind)
    io = run_io(spec, cache_dir=cache_dir).pj_per_bit
    dev = _device(kind)
    return DramEnergy(kind.lower(), core["read"], core["activate"], io["dynamic"], io["termination"], io["phy"],
                      device=f"{dev.name} ({dev.source})",
                      interface=f"CACTI-IO {spec.io_type} {spec.bus_freq_mhz:g} MHz x{spec.num_dq}")
