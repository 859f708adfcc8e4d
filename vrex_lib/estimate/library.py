"""Derived components at the target node (14 nm / 0.8 V) built from :mod:`.constants` rows.

Every number here is a constants row x a width law x a Stillmaker-Baas factor; the laws are:

* integer adder, comparator, counter, bitwise XOR: linear in width;
* integer multiplier: quadratic in width (array multiplier; the law hwcomponents uses for Aladdin);
* FP adder: linear in total width (alignment shifter + significand adder + normalisation);
* FP multiplier: quadratic in significand bits incl. the hidden bit (BF16 8, FP16 11, FP32 24);
* popcount of w bits: a tree of small adders, costed as its total adder bits at the int-adder rate;
* register: per bit per clocked cycle (Aladdin's register includes clock-pin internal power);
* SRAM: per-access energy is a power law in array size fitted to Horowitz's three 64-bit-read
  points (8 KB 10 pJ, 32 KB 20 pJ, 1 MB 100 pJ at 45 nm), linear in access width; write = read
  (assumption); area = bits x 14 nm cell / array efficiency(size).

``arith`` picks the source of the FP/int adders and multipliers: ``'horowitz'`` (default, the usual
reference for arithmetic energy), ``'aladdin'``, or ``'geomean'`` (an ensemble: the geometric mean of
the two sources' energy, area and leakage for each adder/multiplier -- the sources differ up to 8x);
comparators, counters, registers and XOR come
from Aladdin in both (Horowitz has none).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import constants as C
from .scaling import TARGET_NODE_NM, TARGET_VDD, area_factor, energy_factor

SIGNIFICAND_BITS = {"bf16": 8, "fp16": 11, "fp32": 24}
FORMAT_WIDTH = {"bf16": 16, "fp16": 16, "fp32": 32}
ARITH_SOURCES = {"horowitz": "horowitz2014", "aladdin": "aladdin2014", "geomean": "horowitz2014+aladdin2014"}


@dataclass(frozen=True)
class Part:
    """One component at the target node: energy per action (pJ), area (um2), leakage (uW)."""

    name: str
    energy_pj: float
    area_um2: float
    leakage_uw: float
    derivation: str


def _scaled(row: C.ComponentRow, e_mult: float, a_mult: float, name: str, law: str) -> Part:
    ef = energy_factor(row.node_nm, row.vdd, TARGET_NODE_NM, TARGET_VDD)
    af = area_factor(row.node_nm, TARGET_NODE_NM)
    return Part(name, row.energy_pJ * e_mult * ef, row.area_um2 * a_mult * af, row.leakage_uW * e_mult * ef,
                f"{row.source} {row.component}/{row.width}b @{row.node_nm:g}nm/{row.vdd:g}V x{law} "
                f"x S-B(E {ef:.3f}, A {af:.3f})")


def _width_scaled(row: C.ComponentRow, width: int, power: int, name: str, law: str) -> Part:
    """``row`` at ``width`` bits: energy, area and leakage x (width / the row's width) ** ``power`` (``law`` names
    the power in the derivation)."""
    k = (width / row.width) ** power
    return _scaled(row, k, k, name, f"{k:.3g} ({law})")


def _nearest(rows: list[C.ComponentRow], width: int) -> C.ComponentRow:
    return min(rows, key=lambda r: (abs(math.log(r.width / width)), -r.width))


class Library:
    """Component models at 14 nm / 0.8 V for one choice of arithmetic source."""

    def __init__(self, arith: str = "horowitz"):
        if arith not in ARITH_SOURCES:
            raise ValueError(f"arith source {arith!r}: choose one of {sorted(ARITH_SOURCES)}")
        self.arith = arith
        self._src = ARITH_SOURCES[arith]

    # -- logic ---------------------------------------------------------------------------------
    def _ensemble(self, method: str, *args) -> Part | None:
        if self.arith != "geomean":
            return None
        h, a = (getattr(Library(src), method)(*args) for src in ("horowitz", "aladdin"))
        g = lambda x, y: math.sqrt(x * y)  # noqa: E731
        return Part(h.name, g(h.energy_pj, a.energy_pj), g(h.area_um2, a.area_um2), g(h.leakage_uw, a.leakage_uw)
                    if h.leakage_uw > 0 else 0.5 * a.leakage_uw, f"geomean of [{h.derivation}] and [{a.derivation}]")

    def _nearest_scaled(self, kind: str, op: str, key: int | str, width: int, power: int, name: str,
                        law: str) -> Part:
        """The geomean ensemble of method ``kind`` at ``key``, or this source's row of ``kind``/``op`` nearest
        ``width`` bits scaled by :func:`_width_scaled`."""
        if (e := self._ensemble(kind, key)):
            return e
        return _width_scaled(_nearest(C.rows(kind, op, self._src), width), width, power, name, law)

    def int_adder(self, width: int) -> Part:
        return self._nearest_scaled("int_adder", "add", width, width, 1, f"int{width}_adder", "linear")

    def int_multiplier(self, width: int) -> Part:
        return self._nearest_scaled("int_multiplier", "multiply", width, width, 2, f"int{width}_multiplier",
                                    "quadratic")

    def fp_adder(self, fmt: str) -> Part:
        return self._nearest_scaled("fp_adder", "add", fmt, FORMAT_WIDTH[fmt], 1, f"{fmt}_adder", "linear in width")

    def fp_multiplier(self, fmt: str) -> Part:
        if (e := self._ensemble("fp_multiplier", fmt)):
            return e
        rows = C.rows("fp_multiplier", "multiply", self._src)
        r = _nearest(rows, FORMAT_WIDTH[fmt])
        src_sig = SIGNIFICAND_BITS["fp16" if r.width == 16 else "fp32"]
        k = (SIGNIFICAND_BITS[fmt] / src_sig) ** 2
        return _scaled(r, k, k, f"{fmt}_multiplier", f"{k:.3g} (significand^2)")

    def comparator(self, width: int) -> Part:
        return _width_scaled(C.rows("comparator", "compare")[0], width, 1, f"comparator{width}", "linear")

    def counter(self, width: int) -> Part:
        return _width_scaled(C.rows("counter", "count")[0], width, 1, f"counter{width}", "linear")

    def xor(self, width: int) -> Part:
        return _width_scaled(C.rows("bitwise", "xor")[0], width, 1, f"xor{width}", "linear")

    def register(self, bits: int = 1) -> Part:
        r = C.rows("register", "clock")[0]
        return _scaled(r, bits, bits, f"register{bits}", f"{bits} bits")

    def popcount(self, width: int) -> Part:
        """Popcount of ``width`` bits as a tree of adders: level l adds width/2^l pairs of l-bit numbers."""
        adder_bits, n, bits = 0, width, 1
        while n > 1:
            adder_bits += (n // 2) * bits
            n, bits = (n + 1) // 2, bits + 1
        unit = self.int_adder(8)
        k = adder_bits / 8
        return Part(f"popcount{width}", unit.energy_pj * k, unit.area_um2 * k, unit.leakage_uw * k,
                    f"{adder_bits} adder bits x ({unit.derivation})/8")

    def mac(self, fmt: str = "bf16") -> Part:
        """One multiply + one add of ``fmt`` (a MAC-tree leaf; the tree's adders are the adds)."""
        m, a = self.fp_multiplier(fmt), self.fp_adder(fmt)
        return Part(f"{fmt}_mac", m.energy_pj + a.energy_pj, m.area_um2 + a.area_um2, m.leakage_uw + a.leakage_uw,
                    f"multiplier + adder, built from two rows (no direct MAC source): {m.derivation}; {a.derivation}")

    # -- SRAM ------------------------------------------------------------------------------------
    def sram_access(self, size_bytes: float, width_bits: int = 64) -> Part:
        """Energy of one ``width_bits`` read (or write) of an SRAM array of ``size_bytes``."""
        a, b, row = _sram_fit()
        e45 = a * (size_bytes / 1024.0) ** b * (width_bits / 64.0)
        ef = energy_factor(row.node_nm, row.vdd)
        area = sram_area_um2(size_bytes)
        return Part(f"sram_{size_bytes / 1024:g}kb", e45 * ef, area, 0.0,
                    f"horowitz2014 fit E=a*(KB)^{b:.3f}, {width_bits}b access, x S-B E {ef:.3f}; "
                    f"area natarajan2014 cell / efficiency")


def _sram_fit() -> tuple[float, float, C.ComponentRow]:
    """Least-squares power law through Horowitz's 8 KB / 32 KB / 1 MB 64-bit read energies."""
    pts = [(8, "sram_8kb"), (32, "sram_32kb"), (1024, "sram_1mb")]
    rows = [C.rows(name, "read")[0] for _, name in pts]
    x = np.log([kb for kb, _ in pts])
    y = np.log([r.energy_pJ for r in rows])
    b, ln_a = np.polyfit(x, y, 1)
    return float(math.exp(ln_a)), float(b), rows[0]


def sram_efficiency(size_bytes: float) -> float:
    """Cell-area fraction of an SRAM macro: eta_inf / (1 + sqrt(1 KB / size)) (assumption row)."""
    eta_inf = C.rows("sram_array_efficiency")[0].area_um2
    return min(1.0, eta_inf / (1.0 + math.sqrt(1024.0 / size_bytes)))


def sram_area_um2(size_bytes: float) -> float:
    """Macro area at 14 nm: bits x Intel 14 nm HD cell (0.0588 um2) / efficiency(size)."""
    if size_bytes <= 0:
        raise ValueError(f"SRAM size must be positive, got {size_bytes}")
    cell = C.rows("sram_bitcell")[0]
    if cell.node_nm != TARGET_NODE_NM:  # pragma: no cover - the row is at 14 nm
        raise ValueError("bit cell row is not at the target node")
    return size_bytes * 8 * cell.area_um2 / sram_efficiency(size_bytes)


@lru_cache(maxsize=256)
def part(component: str, arith: str = "horowitz") -> Part:
    """A component by name: 'bf16_mac', 'bf16_multiplier', 'fp32_adder', 'int16_adder', 'int32_multiplier',
    'comparator16', 'counter32', 'xor32', 'popcount32', 'register' (1 bit), 'sram_32kb'."""
    lib = Library(arith)
    m = re.fullmatch(r"(bf16|fp16|fp32)_(adder|multiplier|mac)", component)
    if m:
        fmt, unit = m.groups()
        return {"adder": lib.fp_adder, "multiplier": lib.fp_multiplier, "mac": lib.mac}[unit](fmt)
    m = re.fullmatch(r"int(\d+)_(adder|multiplier)", component)
    if m:
        return (lib.int_adder if m[2] == "adder" else lib.int_multiplier)(int(m[1]))
    m = re.fullmatch(r"(comparator|counter|xor|popcount|register)(\d*)", component)
    if m:
        w = int(m[2] or 1 if m[1] == "register" else m[2] or 32)
        return getattr(lib, m[1])(w)
    m = re.fullmatch(r"sram_(\d+(?:\.\d+)?)kb", component)
    if m:
        return lib.sram_access(float(m[1]) * 1024)
    raise KeyError(f"unknown component {component!r}; examples: bf16_mac, fp32_adder, int16_multiplier, "
                   f"comparator16, counter32, xor32, popcount32, register, sram_32kb")


C.CACHE_CLEARERS += [part.cache_clear]
