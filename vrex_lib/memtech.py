"""One record per memory technology: everything the simulator, the estimator and the Table III claims know about
LPDDR5, HBM2e, DDR4 and the NVMe SSD tier, each value with its source.

A :class:`MemoryTech` holds a DRAM technology's JEDEC timing (:class:`JedecTiming`, what the bank-level model of
:mod:`vrex_lib.perf.dram` runs on), its device energy per bit and background power (standby + refresh of a cited
device), the accelerator-side PHY energy, the IDD device of the energy model (:class:`IddDevice`) and the CACTI-IO
channel (:class:`CactiIoChannel`) -- or, for each part a technology lacks, the reason it has none (a caller that
needs it reports that reason instead of skipping silently). A :class:`StorageTech` is the NVMe SSD offload tier
(block size, IOPS, read latency, active and idle power). ``vrex_lib.perf.systems.System`` holds its records; the
constants tables of :mod:`vrex_lib.perf.constants` and :mod:`vrex_lib.estimate.constants` list every value, derived
from these records. Changing a memory technology is editing its record (docs/ARCHITECTURE.md, "Change a memory
technology").

    from vrex_lib import memtech
    memtech.get("lpddr5").timing.tRCD_s            # 1.875e-08
    memtech.get("hbm2e").cacti_io                   # None
    memtech.get("hbm2e").cacti_io_none              # why: CACTI-IO has no HBM interface model
    memtech.table()                                  # every value with its source
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from types import MappingProxyType

import pandas as pd

_RAMULATOR_LP5 = ("JEDEC JESD209-5 LPDDR5-6400 as tabulated in CMU-SAFARI/ramulator2 src/dram/impl/LPDDR5.cpp "
                  "(timing preset LPDDR5_6400 in CK cycles at its listed tCK 1250 ps)")
_DRAMSIM3_HBM = ("umd-memsys/DRAMsim3 configs/HBM2_8Gb_x128.ini (the DRAM simulator the paper names for HBM2e, "
                 "§VI.A), timing in cycles at its tCK = 1 ns")
_DRAMSIM3 = ("S. Li, Z. Yang, D. Reddy, A. Srivastava, B. Jacob, 'DRAMsim3', IEEE CAL 2020; IDD/VDD/timing of its "
             "shipped configs (github.com/umd-memsys/DRAMsim3 configs/<name>.ini, commit 0eb6360)")


@dataclass(frozen=True)
class JedecTiming:
    """One DRAM channel's organisation and JEDEC timing (seconds). ``notes``: per field, how the value was read
    (cycles x tCK); ``source``: the table it was read from."""

    channel_bits: int
    burst_length: int
    banks: int
    page_bytes: int
    tRCD_s: float
    tRP_s: float
    tRAS_s: float
    tRRD_s: float
    tFAW_s: float
    tWTR_s: float
    tCL_s: float
    tCWL_s: float
    tBUS_s: float
    tCK_s: float
    tRFC_s: float
    tREFI_s: float
    source: str
    device: str
    notes: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    TIMES = ("tRCD_s", "tRP_s", "tRAS_s", "tRRD_s", "tFAW_s", "tWTR_s", "tCL_s", "tCWL_s", "tBUS_s", "tCK_s",
             "tRFC_s", "tREFI_s")
    ORG = ("channel_bits", "burst_length", "banks", "page_bytes")

    @property
    def burst_bytes(self) -> int:
        return self.channel_bits * self.burst_length // 8

    @property
    def tRC_s(self) -> float:
        return self.tRAS_s + self.tRP_s

    @property
    def turnaround_s(self) -> float:
        """One read->write->read switch: RD->WR (CL + BL + 2 tCK - CWL) + WR->RD (CWL + BL + tWTR)."""
        rtw = self.tCL_s + self.tBUS_s + 2 * self.tCK_s - self.tCWL_s
        wtr = self.tCWL_s + self.tBUS_s + self.tWTR_s
        return max(0.0, rtw) + wtr


@dataclass(frozen=True)
class IddDevice:
    """One DRAM device's IDD currents (mA), supply (V) and timing (cycles of tCK ns) -- the inputs of the IDD energy
    model that DRAMsim3 and Micron's TN-41-01 use. ``page_bits`` = columns x device width."""

    name: str
    protocol: str
    device_width: int
    burst_length: int
    page_bits: int
    tck_ns: float
    t_ras: int
    t_rp: int
    vdd: float
    idd0: float
    idd2n: float
    idd3n: float
    idd4r: float
    idd4w: float
    source: str
    note: str = ""


@dataclass(frozen=True)
class CactiIoChannel:
    """The channel CACTI-IO models for one DRAM kind: its ``io_type`` electrical model at ``bus_freq_mhz`` (data on
    both edges) with these pin counts (``loads`` DRAM loads per DQ; ``device_width`` bits per device)."""

    io_type: str
    bus_freq_mhz: float
    num_dq: int
    num_dqs: int
    num_ca: int
    num_clk: int
    loads: int
    device_width: int
    source: str
    note: str = ""


@dataclass(frozen=True)
class MemoryTech:
    """One DRAM technology (see the module docstring). Energies in pJ/bit, powers in W, capacities in Gbit.

    bus_bits: the bus the paper gives the technology (§VI.A; None for the server's host memory, which the link and
    not its bus bounds). timing / idd / cacti_io: None with ``*_none`` saying why. device_pj_per_bit: device energy
    per bit transferred (the cited row); tools_energy: the simulator takes the pJ/bit from the IDD device + CACTI-IO
    channel instead (:func:`vrex_lib.estimate.dram.dram_energy`), device and PHY together. phy_pj_per_bit: the
    accelerator-side DRAM interface (None where no accelerator drives it). background_w: standby + refresh power of
    one ``background_device_gbit`` device (scaled by capacity)."""

    name: str
    label: str
    bus_bits: int | None
    timing: JedecTiming | None
    timing_none: str
    device_pj_per_bit: float
    device_pj_source: str
    device_pj_note: str
    phy_pj_per_bit: float | None
    phy_node_nm: float
    phy_source: str
    phy_note: str
    background_w: float | None
    background_device_gbit: float
    background_vdd: float
    background_source: str
    background_note: str
    idd: IddDevice | None
    idd_none: str
    cacti_io: CactiIoChannel | None
    cacti_io_none: str
    tools_energy: bool = False

    def __post_init__(self) -> None:
        for part in ("timing", "idd", "cacti_io"):
            if (getattr(self, part) is None) == (not getattr(self, f"{part}_none")):
                raise ValueError(f"memory technology {self.name}: give either {part} or the reason it has none "
                                 f"({part}_none), not both or neither")


@dataclass(frozen=True)
class StorageTech:
    """The NVMe SSD offload tier: logical block, random-read IOPS, QD1 read latency, active and idle power; each with
    its source (``sources``: field -> source)."""

    name: str
    label: str
    granule_bytes: int
    read_iops: float
    read_latency_s: float
    active_w: float
    idle_w: float
    sources: MappingProxyType


def _lp5_timing() -> JedecTiming:
    ck = 1.25e-9
    cyc = dict(tRCD_s=(15, "ACT to RD"), tRP_s=(15, "per-bank precharge tRPpb"), tRAS_s=(34, "ACT to PRE"),
               tRRD_s=(4, "ACT to ACT, any bank"), tFAW_s=(16, "four-activate window"),
               tWTR_s=(5, "write to read, other bank group (nWTRS)"), tCL_s=(20, "read latency"),
               tCWL_s=(11, "write latency"),
               tBUS_s=(4, "burst slot used by the controller's turnaround rule (nBL16)"), tCK_s=(1, "command clock"))
    notes = {k: f"{w}: {c:g} nCK x 1.25 ns" for k, (c, w) in cyc.items()}
    notes.update(tRFC_s="all-bank refresh tRFCab table (ns), 16 Gb", tREFI_s="tREFI base 3906 ns (<= 85 C)",
                 channel_bits="JEDEC JESD209-5: an LPDDR5 channel is 16 bits wide; a 256-bit bus (§VI.A) is 16 "
                              "channels", burst_length="JEDEC JESD209-5: BL16 (32 B on x16); bank-group mode above "
                                                       "3200 Mbps",
                 banks="org preset LPDDR5_16Gb_x16: 4 bank groups x 4 banks", page_bytes="1024 columns x 16 bit")
    return JedecTiming(16, 16, 16, 2048, **{k: c * ck for k, (c, _) in cyc.items()}, tRFC_s=280e-9,
                       tREFI_s=3906e-9, source=_RAMULATOR_LP5, device="LPDDR5-6400 x16 channel, 16 Gb die",
                       notes=MappingProxyType(notes))


def _hbm_timing() -> JedecTiming:
    cyc = dict(tRCD_s=(14, "tRCDRD"), tRP_s=(14, "tRP"), tRAS_s=(34, "tRAS"), tRRD_s=(4, "tRRD_S (other bank group)"),
               tFAW_s=(30, "tFAW"), tWTR_s=(6, "tWTR_S"), tCL_s=(14, "CL"), tCWL_s=(4, "CWL"),
               tBUS_s=(2, "BL/2 burst cycles"), tCK_s=(1, "command clock"), tRFC_s=(260, "tRFC"),
               tREFI_s=(3900, "tREFI"))
    notes = {k: f"{w}: {c:g} tCK x 1 ns (DRAM core timings are set in ns; HBM2e keeps them)"
             for k, (c, w) in cyc.items()}
    notes.update(channel_bits="bus_width = 128; 5120 bits (§VI.A) = 40 channels", burst_length="BL = 4 (64 B)",
                 banks="bankgroups = 4 x banks_per_group = 4", page_bytes="columns = 64 x device_width 128 bit")
    return JedecTiming(128, 4, 16, 1024, **{k: c * 1e-9 for k, (c, _) in cyc.items()}, source=_DRAMSIM3_HBM,
                       device="HBM2 8 Gb x128 channel", notes=MappingProxyType(notes))


_NO_HBM_IO = ("CACTI-IO has no HBM (wide-I/O, through-silicon) interface model: HBM2e keeps its cited device and "
              "PHY rows (dram_hbm2e, dram_phy_hbm2e); the IDD core of the HBM2 device is a cross-check only")

LPDDR5 = MemoryTech(
    "lpddr5", "LPDDR5-6400 (edge: V-Rex8, Jetson AGX Orin)", 256, _lp5_timing(), "",
    5.0, "assumption", "midpoint of the often-quoted 4-6 pJ/bit for LPDDR4/5 -- unverified (docs/DECISIONS.md D25)",
    1.83, 65, "kim2018_lpddr4", "LPDDR4 controller interface, burst-read figure (the workload is read-dominated; "
    "write is 5.68 pJ/bit); LPDDR4 used for LPDDR5 -- unverified as an LPDDR5 PHY",
    34.66e-3, 8, 1.2, "dramsim3", "LPDDR3_8Gb_x32_1866: 1.2 V x 22 mA = 26.4 mW + refresh 1.2 V x (150-22) mA x "
    "196/3645 = 8.26 mW per 8 Gb x32 device; LPDDR3 config used for LPDDR5 (no LPDDR5 config ships; LPDDR5 runs at "
    "lower VDD, so likely high) -- unverified",
    IddDevice("LPDDR3_8Gb_x32_1866", "LPDDR3", 32, 8, 1024 * 32, 1.07, 40, 17, 1.2, 41.5, 21.5, 22.0, 290.0, 285.0,
              "dramsim3", note="LPDDR3 device for LPDDR5 (no LPDDR5 config ships; LPDDR5 runs its core at VDD2H "
                               "1.05 V, so likely high) -- unverified as LPDDR5"), "",
    CactiIoChannel("LPDDR2", 3200, 32, 8, 10, 2, 1, 32, "jedec_lpddr5",
                   note="one x32 channel at LPDDR5-6400 (= Table I's 204.8 GB/s over 256 bits) with CACTI-IO's LPDDR2 "
                        "electrical model (1.2 V I/O, 50-ohm trace, 0.5 ns flight), run beyond its stated 533 MHz "
                        "LPDDR2 range; LPDDR5 signals at VDDQ 0.5 V, so likely high: a cross-check (upper bound), "
                        "not the simulator's energy"), "")

HBM2E = MemoryTech(
    "hbm2e", "HBM2e (server: V-Rex48, A100)", 5120, _hbm_timing(), "",
    3.9, "oconnor2017", "HBM2 figure used for HBM2e -- unverified",
    0.41, 40, "hbm_phy_vlsi2022", "research PAM-4 HBM-controller transceiver; a lower bound for an HBM2e PHY + "
    "controller -- unverified as representative",
    81.6e-3, 8, 1.2, "dramsim3", "HBM2_8Gb_x128: 1.2 V x 55 mA = 66.0 mW + refresh 1.2 V x (250-55) mA x 260/3900 = "
    "15.6 mW per 128-bit channel of 1 GB (channel_size 1024 MB); HBM2 used for HBM2e (16 Gb dies would give about "
    "half per GB) -- unverified",
    IddDevice("HBM2_8Gb_x128", "HBM2", 128, 4, 64 * 128, 1.0, 34, 14, 1.2, 65.0, 40.0, 55.0, 390.0, 500.0, "dramsim3",
              note="HBM2 channel for HBM2e -- unverified as HBM2e"), "",
    None, _NO_HBM_IO)

DDR4 = MemoryTech(
    "ddr4", "DDR4-3200 (the server's host memory)", None, None,
    "host memory is reached over the PCIe link: the link, not the DDR4 bank timing, bounds every transfer the "
    "simulator charges to it (its copies use a measured host copy rate, perf.constants host.*)",
    15.0, "assumption", "DDR4 DIMM incl. I/O, order of magnitude -- unverified; a cross-check only: DDR4's energy "
    "comes from the IDD core + CACTI-IO model (tools_energy, docs/DECISIONS.md D124)",
    None, float("nan"), "", "no accelerator-side PHY: the host CPU's controller drives it; CACTI-IO's PHY term is in "
    "the tools' total",
    None, 8, 1.2, "", "the host's DDR4 background belongs to the host CPU, present for every system compared",
    IddDevice("DDR4_8Gb_x8_3200", "DDR4", 8, 8, 1024 * 8, 0.63, 52, 22, 1.2, 57.0, 37.0, 52.0, 168.0, 150.0,
              "dramsim3"), "",
    CactiIoChannel("DDR4", 1600, 64, 16, 22, 2, 2, 8, "jedec_ddr4",
                   note="one 64-bit DDR4-3200 channel of x8 devices, two ranks (host memory of the server)"), "",
    tools_energy=True)

NVME_SSD = StorageTech(
    "nvme_ssd", "M.2 NVMe SSD (Kioxia BG6 class; the edge offload tier)", 4096, 850e3, 80e-6, 4.0, 0.05,
    MappingProxyType(dict(
        granule_bytes="NVM Express Base Specification: logical blocks of 4 KiB (the usual LBA format of client "
                      "drives such as the Kioxia BG6)",
        read_iops="Kioxia BG6 announcement (May 2023, e.g. computerbase.de 2023-05): up to 850,000 random-read IOPS, "
                  "6,000 MB/s sequential read",
        read_latency_s="docs/DECISIONS.md D105: no BG6 QD1 latency published; typical client TLC read latency taken "
                       "(choice, unverified)",
        active_w="kioxia_bg6: active power 4.0 W -- unverified against the datasheet (XG6 sibling: <4.5 W typical "
                 "read)",
        idle_w="anandtech_xg6: idle (PS3) power 50 mW of the XG6 sibling; BG6's own table not found offline -- "
               "unverified for the BG6")))

#: name -> record, every memory technology and the storage tier.
RECORDS: MappingProxyType = MappingProxyType({r.name: r for r in (LPDDR5, HBM2E, DDR4, NVME_SSD)})
DRAM: tuple[str, ...] = tuple(n for n, r in RECORDS.items() if isinstance(r, MemoryTech))


def get(name: "str | MemoryTech | StorageTech") -> "MemoryTech | StorageTech":
    """The record named ``name`` (case-insensitive; a record passes through); an unknown name lists the choices."""
    if isinstance(name, (MemoryTech, StorageTech)):
        return name
    r = RECORDS.get(str(name).lower())
    if r is None:
        raise ValueError(f"unknown memory technology {name!r}: choose one of {', '.join(RECORDS)}")
    return r


def dram(name: "str | MemoryTech") -> MemoryTech:
    """The DRAM record ``name`` (an error for the storage tier or an unknown name)."""
    r = get(name)
    if not isinstance(r, MemoryTech):
        raise ValueError(f"{r.name} is a storage tier, not a DRAM technology: choose one of {', '.join(DRAM)}")
    return r


def table() -> pd.DataFrame:
    """Every value of every record: tech, field, value, source, note (the parts a technology lacks with why)."""
    rows = []
    for r in RECORDS.values():
        if isinstance(r, StorageTech):
            rows += [dict(tech=r.name, field=f, value=getattr(r, f), source=s, note="") for f, s in r.sources.items()]
            continue
        for part in ("timing", "idd", "cacti_io"):
            if getattr(r, part) is None:
                rows.append(dict(tech=r.name, field=part, value=None, source="", note=getattr(r, f"{part}_none")))
        if r.timing is not None:
            t = r.timing
            rows += [dict(tech=r.name, field=f, value=getattr(t, f), source=t.source, note=t.notes.get(f, ""))
                     for f in JedecTiming.ORG + JedecTiming.TIMES]
        rows += [dict(tech=r.name, field="device_pj_per_bit", value=r.device_pj_per_bit, source=r.device_pj_source,
                      note=r.device_pj_note),
                 dict(tech=r.name, field="phy_pj_per_bit", value=r.phy_pj_per_bit, source=r.phy_source,
                      note=r.phy_note),
                 dict(tech=r.name, field="background_w", value=r.background_w, source=r.background_source,
                      note=r.background_note)]
        for part in ("idd", "cacti_io"):
            d = getattr(r, part)
            if d is not None:
                rows += [dict(tech=r.name, field=f"{part}.{f.name}", value=getattr(d, f.name), source=d.source,
                              note=d.note) for f in fields(d) if f.name not in ("source", "note")]
    return pd.DataFrame(rows)


__all__ = ["CactiIoChannel", "DDR4", "DRAM", "HBM2E", "IddDevice", "JedecTiming", "LPDDR5", "MemoryTech", "NVME_SSD",
           "RECORDS", "StorageTech", "dram", "get", "table"]
