"""Area and power of one V-Rex core = sum over blocks of (component model x count), counts from the config.

Blocks follow Table III: LXE = DPE, VPE, on-chip memory (384 KB); DRE = HCU, WTU, KVMU. The DRE's
own SRAMs (Fig. 10: 128 B + 4 KB in the HCU, 8 KB + 8 KB in the WTU) are booked to the HCU/WTU rows,
because Table III's "on-chip memory" (0.34 mm^2) is the LXE's 384 KB alone (Table III's rows; docs/DECISIONS.md
D24).

Power of one core = leakage + clock network + activity x dynamic (docs/DECISIONS.md D24):

* **leakage**: count x the component's leakage, Aladdin's per-unit leakage (TSMC 40G) scaled to 14 nm / 0.8 V
  with Stillmaker-Baas (Horowitz gives no leakage, so Aladdin's row stands in for every logic component); SRAM
  array leakage has no cited source here and is left out (a lower bound, stated);
* **clock network**: every pipeline/queue register bit's clock energy (Aladdin 'register clock', per bit per
  cycle) x f_clk, drawn every cycle whatever the activity (no clock gating assumed); the clock tree's buffers and
  wires beyond the flip-flops are not in any cited row and are left out (a lower bound);
* **dynamic**: count x energy/action x actions/cycle x utilisation x f_clk for datapath and SRAM accesses.

The default :class:`Activity` is **full utilisation at 800 MHz** (what a synthesis tool's default-activity report
approximates: Table III). The performance simulator evaluates the same model at its utilisations through
:class:`CorePowerModel` (linear in the utilisations; equal to :func:`core_breakdown` at the same activity).

Micro-architecture the paper does not give (pipeline depth, widths, queue depth, SRAM banking) is
in :class:`MicroArch`, each default stated; notebook 05 varies them.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import pandas as pd

from ..config import ReSVConfig, VRexCoreConfig
from ..hw.fixedpoint import acc_bits
from . import constants as C
from .library import Library, Part

TABLE3_BLOCKS = ("DPE", "VPE", "On-chip memory", "HCU", "WTU", "KVMU")
DRE_BLOCKS = ("HCU", "WTU", "KVMU")
GROUP = {"DPE": "LXE", "VPE": "LXE", "On-chip memory": "LXE", "HCU": "DRE", "WTU": "DRE", "KVMU": "DRE"}


@dataclass(frozen=True)
class MicroArch:
    """Choices below the paper's level of detail (assumptions; each one a field, varied in notebook 05).

    dpe_tree_adder:  format of the MAC-tree adders ('bf16'; 'fp32' = wide-accumulating tree).
    dpe_pipeline_every: a register stage after every k-th adder-tree level (1 = every level).
    vpe_lane_format: arithmetic format of a VPE lane's multiplier/adder (FP32 internally for softmax/norm).
    lxe_sram_bank_bytes: bank size of the 384 KB LXE memory (access energy depends on it).
    lxe_sram_word_bits: word of one LXE bank in the CACTI model (None: the full-activity read traffic per cycle
        spread over the banks, :func:`vrex_lib.estimate.memories.lxe_word_bits`).
    score_bits / count_bits: WTU score and token-count entry widths (8 KB / 16 bit = 4096 entries, Fig. 10).
    kvmu_queue_depth / kvmu_entry_bits: KVMU request-queue size.
    """

    dpe_tree_adder: str = "bf16"
    dpe_pipeline_every: int = 1
    vpe_lane_format: str = "fp32"
    lxe_sram_bank_bytes: int = 32 * 1024
    lxe_sram_word_bits: int | None = None
    score_bits: int = 16
    count_bits: int = 16
    kvmu_queue_depth: int = 32
    kvmu_entry_bits: int = 64

    def replace(self, **changes) -> "MicroArch":
        return replace(self, **changes)


@dataclass(frozen=True)
class Activity:
    """Switching activity: per-block utilisation in [0, 1] and the LXE SRAM traffic per cycle.

    ``sram_read_bits`` / ``sram_write_bits`` None = the operand traffic of a fully busy LXE (DPE input
    vector + VPE operands), see :func:`core_breakdown`. Default: everything busy at ``freq_hz``
    (None = the config's 800 MHz).
    """

    dpe: float = 1.0
    vpe: float = 1.0
    hcu: float = 1.0
    wtu: float = 1.0
    kvmu: float = 1.0
    sram_read_bits: float | None = None
    sram_write_bits: float | None = None
    freq_hz: float | None = None

    def __post_init__(self):
        for k in ("dpe", "vpe", "hcu", "wtu", "kvmu"):
            v = getattr(self, k)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"Activity.{k} = {v}: a utilisation must be in [0, 1]")

    @classmethod
    def from_counts(cls, cycles: float, cfg: VRexCoreConfig = VRexCoreConfig(), *, dpe_macs: float = 0,
                    vpe_ops: float = 0, sram_read_bits: float = 0, sram_write_bits: float = 0,
                    hcu_compares: float = 0, wtu_elements: float = 0, kvmu_requests: float = 0) -> "Activity":
        """Utilisations from action counts over ``cycles`` (e.g. one frame from the performance simulator).

        hcu_compares: Hamming comparisons (one lane-cycle each); wtu_elements: score x count elements
        processed (one lane-cycle each); kvmu_requests: KV transfer requests issued (one cycle each).
        """
        if cycles <= 0:
            raise ValueError(f"cycles must be positive, got {cycles}")
        cap = lambda x: min(1.0, max(0.0, x))  # noqa: E731
        return cls(dpe=cap(dpe_macs / (cycles * cfg.n_dpe_h * cfg.n_dpe_w)),
                   vpe=cap(vpe_ops / (cycles * cfg.n_vpe_h * cfg.n_vpe_w)),
                   hcu=cap(hcu_compares / (cycles * cfg.n_hcu_h * cfg.n_hcu_w)),
                   wtu=cap(wtu_elements / (cycles * cfg.n_wtu_h * cfg.n_wtu_w)),
                   kvmu=cap(kvmu_requests / cycles),
                   sram_read_bits=sram_read_bits / cycles, sram_write_bits=sram_write_bits / cycles)


@dataclass
class _Item:
    block: str
    component: str
    count: float
    part: Part
    actions_per_cycle: float  # per unit, at utilisation 1
    util: float
    area_override_um2: float | None = None


def _items(cfg: VRexCoreConfig, act: Activity, lib: Library, ua: MicroArch, n_hp: int) -> list[_Item]:
    it: list[_Item] = []
    add = lambda *a, **k: it.append(_Item(*a, **k))  # noqa: E731

    # --- DPE: n_dpe_h MAC trees, each n_dpe_w multipliers + an (n_dpe_w-1)-adder tree + accumulator.
    h, w = cfg.n_dpe_h, cfg.n_dpe_w
    levels = max(1, math.ceil(math.log2(w)))
    # Values held in pipeline registers per tree: operands latched (w), products (w), and the tree's
    # level outputs where a stage is placed (w/2 + w/4 + ... for every k-th level).
    tree_vals = sum(w // 2**lvl for lvl in range(1, levels + 1) if lvl % ua.dpe_pipeline_every == 0)
    adder_bits = 16 if ua.dpe_tree_adder == "bf16" else 32
    add("DPE", "bf16 multiplier", h * w, lib.fp_multiplier("bf16"), 1.0, act.dpe)
    add("DPE", f"{ua.dpe_tree_adder} tree adder", h * (w - 1), lib.fp_adder(ua.dpe_tree_adder), 1.0, act.dpe)
    add("DPE", "fp32 accumulator", h, lib.fp_adder("fp32"), 1.0, act.dpe)
    dpe_reg_bits = h * (w * 16 + w * 16 + tree_vals * adder_bits + 32) + w * 16  # + broadcast input vector
    add("DPE", "pipeline registers (bits)", dpe_reg_bits, lib.register(1), 1.0, act.dpe)

    # --- VPE: n_vpe_h x n_vpe_w lanes, each a multiplier + adder + operand/result registers.
    lanes = cfg.n_vpe_h * cfg.n_vpe_w
    vbits = 32 if ua.vpe_lane_format == "fp32" else 16
    add("VPE", f"{ua.vpe_lane_format} multiplier", lanes, lib.fp_multiplier(ua.vpe_lane_format), 1.0, act.vpe)
    add("VPE", f"{ua.vpe_lane_format} adder", lanes, lib.fp_adder(ua.vpe_lane_format), 1.0, act.vpe)
    add("VPE", "lane registers (bits)", lanes * 3 * vbits, lib.register(1), 1.0, act.vpe)

    # --- LXE on-chip memory: banks; traffic = DPE input vector + VPE two operands in, VPE + DPE results out.
    n_banks = lxe_banks(cfg, ua)
    bank = lib.sram_access(ua.lxe_sram_bank_bytes, 64)
    rd_full, wr_full = lxe_traffic_bits(cfg, act.dpe, act.vpe)
    rd = act.sram_read_bits if act.sram_read_bits is not None else rd_full
    wr = act.sram_write_bits if act.sram_write_bits is not None else wr_full
    add("On-chip memory", f"SRAM {n_banks} x {ua.lxe_sram_bank_bytes // 1024} KB banks", n_banks, bank,
        (rd + wr) / 64.0 / n_banks, 1.0)

    # --- HCU: n_hcu_h XOR accumulators x n_hcu_w inputs; each input = XOR + popcount of N_hp bits and a
    # "< Th_hd" compare; a min-distance tree per accumulator picks the nearest cluster (§10d); HC table
    # updater = token-count counter + address adder. Memories: current / key-cache hash bits.
    hh, hw = cfg.n_hcu_h, cfg.n_hcu_w
    dbits = max(1, math.ceil(math.log2(n_hp + 1)))
    add("HCU", f"xor{n_hp}", hh * hw, lib.xor(n_hp), 1.0, act.hcu)
    add("HCU", f"popcount{n_hp}", hh * hw, lib.popcount(n_hp), 1.0, act.hcu)
    add("HCU", f"< Th_hd comparator{dbits}", hh * hw, lib.comparator(dbits), 1.0, act.hcu)
    add("HCU", f"min-distance comparator{dbits}", hh * (hw - 1), lib.comparator(dbits), 1.0, act.hcu)
    add("HCU", "HC table updater (counter32 + int32 adder)", hh, _sum_parts(lib.counter(32), lib.int_adder(32)),
        1.0, act.hcu)
    add("HCU", "registers (bits)", hh * (hw * (n_hp + dbits) + n_hp + 64), lib.register(1), 1.0, act.hcu)
    for name, size, bits_per_cycle in (("current hash-bit SRAM", cfg.hcu_cur_hash_bytes, n_hp),
                                       ("key-cache hash-bit SRAM", cfg.hcu_key_hash_bytes, hh * hw * n_hp)):
        add("HCU", name, 1, lib.sram_access(size, 64), bits_per_cycle / 64.0, act.hcu)

    # --- WTU: n_wtu_h cores x n_wtu_w lanes. Per lane: upper/lower bucket sorters (2 comparators),
    # score x count multiplier; per core: (w-1)-adder tree + accumulator, min/max (2 comparators/lane in the
    # preprocess step), "< Th_csum" comparator, Th_wics multiplier (ratio x Sum), bucket-range updater,
    # aggregator bitmask. Memories: score and token-count SRAMs.
    th, tw = cfg.n_wtu_h, cfg.n_wtu_w
    sb, cb = ua.score_bits, ua.count_bits
    pb = sb + cb
    add("WTU", f"bucket sorters (2 x comparator{sb})", th * tw * 2, lib.comparator(sb), 1.0, act.wtu)
    add("WTU", f"min/max comparators{sb}", th * tw * 2, lib.comparator(sb), 1.0, act.wtu)
    add("WTU", f"score x count multiplier{max(sb, cb)}", th * tw, lib.int_multiplier(max(sb, cb)), 1.0, act.wtu)
    add("WTU", f"adder tree int{pb + 4}", th * (tw - 1), lib.int_adder(pb + 4), 1.0, act.wtu)
    # Sum / Acc accumulators: the RTL's width for the score memory's entry count (vrex_lib.hw.fixedpoint).
    ab = acc_bits(cfg.wtu_score_bytes * 8 // sb)
    add("WTU", f"cumulative-sum accumulator int{ab}", th, lib.int_adder(ab), 1.0, act.wtu)
    add("WTU", f"< Th_csum comparator{ab}", th, lib.comparator(ab), 1.0, act.wtu)
    add("WTU", "Th_wics multiplier int32", th, lib.int_multiplier(32), 1.0, act.wtu)
    add("WTU", f"bucket-range updater int{sb}", th, lib.int_adder(sb), 1.0, act.wtu)
    add("WTU", "registers (bits)", th * (tw * (sb + cb + pb + 1) + ab * 3 + 4 * sb), lib.register(1), 1.0, act.wtu)
    add("WTU", "score SRAM", th, lib.sram_access(cfg.wtu_score_bytes, 64), tw * sb / 64.0, act.wtu)
    add("WTU", "token-count SRAM", th, lib.sram_access(cfg.wtu_count_bytes, 64), tw * cb / 64.0, act.wtu)

    # --- KVMU: address generator (base + cluster x stride: one multiplier, two adders), request queue,
    # head/tail counters.
    add("KVMU", "address generator (int32 mult + 2 int32 adders)", 1,
        _sum_parts(lib.int_multiplier(32), lib.int_adder(32), lib.int_adder(32)), 1.0, act.kvmu)
    add("KVMU", "request queue (bits)", ua.kvmu_queue_depth * ua.kvmu_entry_bits, lib.register(1),
        1.0, act.kvmu)
    add("KVMU", "queue head/tail counters", 2, lib.counter(int(math.ceil(math.log2(ua.kvmu_queue_depth))) or 1),
        1.0, act.kvmu)
    return it


def lxe_banks(cfg: VRexCoreConfig, ua: MicroArch) -> int:
    """Banks of the LXE's on-chip memory: its size / ``ua.lxe_sram_bank_bytes``, rounded up."""
    return max(1, math.ceil(cfg.lxe_sram_bytes / ua.lxe_sram_bank_bytes))


def lxe_traffic_bits(cfg: VRexCoreConfig, dpe: float = 1.0, vpe: float = 1.0) -> tuple[float, float]:
    """(read, write) bits per cycle of the LXE memory at DPE/VPE utilisations ``dpe``/``vpe``: the DPE's BF16
    input vector (n_dpe_w words) and the VPE's two operands per lane in; one DPE result per tree per n_dpe_w
    cycles and one VPE result per lane out."""
    w, h, lanes = cfg.n_dpe_w, cfg.n_dpe_h, cfg.n_vpe_h * cfg.n_vpe_w
    return dpe * w * 16 + vpe * lanes * 2 * 16, dpe * h * 16 / w + vpe * lanes * 16


def _sum_parts(*parts: Part) -> Part:
    return Part(" + ".join(p.name for p in parts), sum(p.energy_pj for p in parts), sum(p.area_um2 for p in parts),
                sum(p.leakage_uw for p in parts), "; ".join(p.derivation for p in parts))


def _power_items(cfg: VRexCoreConfig, act: Activity, arith: str, ua: MicroArch,
                 n_hp: int) -> list[tuple[_Item, float, bool]]:
    """(item, leakage uW per unit, is a clocked register) per component. Leakage falls back to Aladdin's row of
    the same component where the chosen arithmetic source gives none (Horowitz lists energy and area only)."""
    items = _items(cfg, act, Library(arith), ua, n_hp)
    ala = _items(cfg, act, Library("aladdin"), ua, n_hp) if arith != "aladdin" else items
    out = []
    for i, a in zip(items, ala):
        leak = i.part.leakage_uw if i.part.leakage_uw > 0 else a.part.leakage_uw
        out.append((i, leak, i.part.name.startswith("register")))
    return out


@dataclass(frozen=True)
class CorePowerModel:
    """One core's power as leakage + clock + sum over activity sources of utilisation x dynamic power at 100 %.

    ``dynamic_w`` maps an activity source ('dpe', 'vpe', 'hcu', 'wtu', 'kvmu') to its dynamic power at full
    utilisation, the LXE SRAM's operand traffic included in 'dpe'/'vpe' (the default traffic of
    :func:`core_breakdown`). :meth:`power_w` equals ``core_breakdown(cfg, Activity(...))['power_mW'].sum()/1e3``.
    """

    leakage_w: float
    clock_w: float
    dynamic_w: tuple[tuple[str, float], ...]

    SOURCES = ("dpe", "vpe", "hcu", "wtu", "kvmu")

    @classmethod
    def of(cls, cfg: VRexCoreConfig = VRexCoreConfig(), *, arith: str = "horowitz", uarch: MicroArch = MicroArch(),
           resv: ReSVConfig = ReSVConfig()) -> "CorePowerModel":
        # The simulator builds a System per point of a sweep (hundreds of thousands in a robustness re-grade); the
        # model depends only on these records and the component rows, so it is built once per combination and
        # dropped whenever a row is perturbed (estimate.constants.CACHE_CLEARERS).
        return _core_power_model(cls, cfg, arith, uarch, resv)

    @classmethod
    def _build(cls, cfg: VRexCoreConfig, arith: str, uarch: MicroArch, resv: ReSVConfig) -> "CorePowerModel":
        f = cfg.freq_hz
        zero = dict.fromkeys(cls.SOURCES, 0.0)

        def total(act: Activity) -> tuple[float, float, float]:
            leak = clock = dyn = 0.0
            for i, leak_uw, is_clock in _power_items(cfg, act, arith, uarch, resv.n_hp):
                per_cycle_w = i.count * i.part.energy_pj * i.actions_per_cycle * f * 1e-12
                leak += i.count * leak_uw * 1e-6
                if is_clock:
                    clock += per_cycle_w
                else:
                    dyn += per_cycle_w * i.util
            return leak, clock, dyn

        leak, clock, _ = total(Activity(**zero, sram_read_bits=0, sram_write_bits=0))
        dyn = tuple((src, total(Activity(**{**zero, src: 1.0}))[2]) for src in cls.SOURCES)
        return cls(leak, clock, dyn)

    def power_w(self, dpe: float = 0.0, vpe: float = 0.0, hcu: float = 0.0, wtu: float = 0.0,
                kvmu: float = 0.0) -> float:
        """Core power (W) at these utilisations, each in [0, 1]."""
        u = dict(dpe=dpe, vpe=vpe, hcu=hcu, wtu=wtu, kvmu=kvmu)
        for k, v in u.items():
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"utilisation {k}={v} must be in [0, 1]")
        return self.leakage_w + self.clock_w + sum(u[k] * w for k, w in self.dynamic_w)

    @property
    def peak_w(self) -> float:
        return self.power_w(1, 1, 1, 1, 1)


@functools.lru_cache(maxsize=64)
def _core_power_model(cls: type, cfg: VRexCoreConfig, arith: str, uarch: MicroArch,
                      resv: ReSVConfig) -> CorePowerModel:
    return cls._build(cfg, arith, uarch, resv)


C.CACHE_CLEARERS.append(_core_power_model.cache_clear)


def core_breakdown(cfg: VRexCoreConfig = VRexCoreConfig(), activity: Activity | None = None, *,
                   arith: str = "horowitz", uarch: MicroArch = MicroArch(),
                   resv: ReSVConfig = ReSVConfig()) -> pd.DataFrame:
    """Per-component area and power of one core at 14 nm / 0.8 V.

    Returns columns: block (Table III name), group (LXE/DRE), component, count, area_mm2, power_mW,
    dynamic_mW, clock_mW, leakage_mW, energy_pJ_per_action, derivation (power_mW = dynamic + clock + leakage).
    """
    act = activity or Activity()
    f = act.freq_hz or cfg.freq_hz
    recs = []
    for i, leak_uw, clock in _power_items(cfg, act, arith, uarch, resv.n_hp):
        per_cycle_mw = i.count * i.part.energy_pj * i.actions_per_cycle * f * 1e-9  # pJ * Hz = 1e-12 W
        clock_mw = per_cycle_mw if clock else 0.0
        dyn_mw = 0.0 if clock else per_cycle_mw * i.util
        leak_mw = i.count * leak_uw * 1e-3
        recs.append(dict(block=i.block, group=GROUP[i.block], component=i.component, count=i.count,
                         area_mm2=i.count * i.part.area_um2 * 1e-6, power_mW=dyn_mw + clock_mw + leak_mw,
                         dynamic_mW=dyn_mw, clock_mW=clock_mw, leakage_mW=leak_mw,
                         energy_pJ_per_action=i.part.energy_pj, derivation=i.part.derivation))
    return pd.DataFrame.from_records(recs)


def block_table(df: pd.DataFrame) -> pd.DataFrame:
    """Sum a :func:`core_breakdown` frame per Table III block (in Table III order), with % of total."""
    b = df.groupby("block", sort=False)[["area_mm2", "power_mW"]].sum().reindex(list(TABLE3_BLOCKS))
    b["area_pct"] = 100 * b["area_mm2"] / b["area_mm2"].sum()
    b["power_pct"] = 100 * b["power_mW"] / b["power_mW"].sum()
    return b


def dre_share(df: pd.DataFrame) -> dict[str, float]:
    """DRE (HCU + WTU + KVMU) share of core area and power, in percent."""
    dre = df[df["group"] == "DRE"]
    return dict(area_pct=100 * dre["area_mm2"].sum() / df["area_mm2"].sum(),
                power_pct=100 * dre["power_mW"].sum() / df["power_mW"].sum())


def core_area_mm2(cfg: VRexCoreConfig = VRexCoreConfig(), **kw) -> float:
    return float(core_breakdown(cfg, **kw)["area_mm2"].sum())


def chip_area_mm2(n_cores: int, cfg: VRexCoreConfig = VRexCoreConfig(), **kw) -> float:
    """Area of an n-core V-Rex: n x core area. Interconnect, PHYs and pads are not modelled (the paper's
    V-Rex8 figure is exactly 8 x 1.89 mm^2, so it does not include them either)."""
    if n_cores < 1:
        raise ValueError(f"n_cores must be >= 1, got {n_cores}")
    return n_cores * core_area_mm2(cfg, **kw)


def dre_area_power(core: VRexCoreConfig, n_hp: int) -> dict[str, float]:
    """DRE (HCU + WTU + KVMU) area (mm2) and full-activity power (mW) of one core under the component model, and
    the core's area (mm2) -- one design point of the design-space sweep (:mod:`vrex_lib.dse`)."""
    df = core_breakdown(core, resv=ReSVConfig(n_hp=int(n_hp)))
    dre = df[df["group"] == "DRE"]
    return dict(dre_area_mm2=float(dre["area_mm2"].sum()), dre_power_mW=float(dre["power_mW"].sum()),
                core_area_mm2=float(df["area_mm2"].sum()))
