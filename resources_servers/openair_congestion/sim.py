"""A small deterministic 5G downlink simulator: cells sharing their PRBs among UEs, step by step.

Not a physical RAN model: coarse, explainable dynamics in which every control has a parameter-aware,
persistent effect, so a policy's choices change what it observes next. Everything follows from the
scenario (seed, regime, difficulty) and the setpoints applied so far; nothing is random at step time.

Per step and cell: each UE's link picks an MCS from its SINR within the cell's MCS bounds (forcing it above
what the channel carries raises BLER); its rate if given the whole cell is capacity x (MCS+1)/28 x
(1 - BLER); the scheduler shares the PRBs by weights (PF equal time, RR equal throughput, MaxCI favouring
good channels, times the per-5QI QoS weights), never more than a UE needs or its PRB cap allows, handing
what one leaves to the others. Delivered throughput, buffers, SLA misses and Jain fairness follow.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

PRB_TOTAL = 273
MCS_TOP = 27
REGIMES = ("prb_exhaustion", "bursty", "interference", "prach_storm", "qos_competition")
BUFFER_CAPACITY_KB = 1024.0
KB_PER_MBPS_STEP = 40.0  # buffer growth per Mbps of unmet demand in one step
SLA_SHARE = {1: 0.98}  # delivered/offered below this is an SLA miss (voice is strict)
DEFAULT_SLA_SHARE = 0.9
DEFAULT_A3_DB, DEFAULT_TTT_MS = 3.0, 320
DEFAULT_P0_DBM, DEFAULT_ALPHA = -90.0, 0.8


@dataclass
class UE:
    ue_id: int
    fiveqi: int
    base_mbps: float
    sinr_db: float
    buffer_kb: float = 0.0


@dataclass
class Cell:
    cell_id: int
    ues: list[UE]
    prach_base: float
    unstable_link_adaptation: bool = False
    inter_cell_interference: bool = False
    policy: str = "PF"
    mcs_min: int = 0
    mcs_max: int = MCS_TOP
    target_bler: float = 0.1
    mcs_bounded: bool = False
    qos_weights: dict[int, float] = field(default_factory=dict)
    prb_caps: dict[int, int] = field(default_factory=dict)
    a3_offset_db: float = DEFAULT_A3_DB
    ttt_ms: int = DEFAULT_TTT_MS
    p0_dbm: float = DEFAULT_P0_DBM
    alpha: float = DEFAULT_ALPHA

    def ue(self, ue_id: int) -> UE | None:
        return next((ue for ue in self.ues if ue.ue_id == ue_id), None)


@dataclass
class Network:
    cells: list[Cell]
    load: list[float]  # offered-load multiplier per step
    capacity_mbps: float
    step: int = 0

    @classmethod
    def scenario(cls, seed: int, regime: str, difficulty: float, steps: int, capacity_mbps: float) -> Network:
        """The scenario of a row: cell and UE layout, channels and load pattern from the seed, pressure
        from the difficulty (0 to 1), the kind of trouble from the regime."""
        rng = random.Random(f"{seed}:{regime}")
        cells = []
        for cell_id in range(rng.choice((1, 2))):
            ues = []
            for ue_id in range(rng.randint(3, 5)):
                fiveqi = 1 if regime == "qos_competition" and ue_id % 2 == 0 else rng.choice((8, 9))
                ues.append(UE(ue_id, fiveqi, 0.0, round(rng.uniform(8.0, 22.0), 1)))
            cell = Cell(cell_id, ues, prach_base=round(rng.uniform(0.01, 0.03), 3))
            overload = 1.0 + 0.6 * difficulty
            shares = [rng.uniform(0.6, 1.4) for _ in ues]
            if regime == "prb_exhaustion":
                # One heavy UE with the best channel, under a throughput-greedy scheduler, starves the rest.
                hog = ues[rng.randrange(len(ues))]
                shares[hog.ue_id] *= 4.0
                hog.sinr_db = max(hog.sinr_db, 20.0)
                cell.policy = "MaxCI"
            if regime == "qos_competition":
                # Small voice flows on weak channels compete with heavy best-effort ones under MaxCI.
                shares = [
                    0.15 if ue.fiveqi == 1 else share * 1.6 for ue, share in zip(ues, shares, strict=True)
                ]
                for ue in ues:
                    ue.sinr_db = round(ue.sinr_db - 6.0, 1) if ue.fiveqi == 1 else ue.sinr_db
                cell.policy = "MaxCI"
            if regime == "interference":
                cell.unstable_link_adaptation = cell.inter_cell_interference = True
                for ue in ues:
                    ue.sinr_db = round(ue.sinr_db - 8.0 - 4.0 * difficulty, 1)
            if regime == "prach_storm":
                cell.prach_base = round(0.25 + 0.15 * difficulty, 3)
            total = sum(shares)
            for ue, share in zip(ues, shares, strict=True):
                ue.base_mbps = round(capacity_mbps * 0.8 * overload * share / total, 2)
            cells.append(cell)
        if regime == "bursty":
            load = [round(rng.choice((0.8, 1.0, 1.5, 1.7)), 2) for _ in range(steps + 1)]
        else:
            load = [round(1.0 + 0.05 * math.sin(step), 3) for step in range(steps + 1)]
        return cls(cells, load, capacity_mbps)

    def start(self) -> dict[str, Any]:
        """The KPIs of step 0, under the default setpoints."""
        return self._observe()

    def advance(self) -> dict[str, Any]:
        """Move one step on (setpoints applied meanwhile take effect) and answer its KPIs."""
        self.step += 1
        return self._observe()

    def _observe(self) -> dict[str, Any]:
        """The KPIs of the current step; buffers carry over, so each step is observed exactly once."""
        factor = self.load[min(self.step, len(self.load) - 1)]
        return {"step": self.step, "cells": [self._cell_kpis(cell, factor) for cell in self.cells]}

    def _cell_kpis(self, cell: Cell, factor: float) -> dict[str, Any]:
        links = [self._link(cell, ue) for ue in cell.ues]
        offered = [ue.base_mbps * factor for ue in cell.ues]
        rates = [self.capacity_mbps * (mcs + 1) / (MCS_TOP + 1) * (1 - bler) for mcs, bler, _ in links]
        needs = [want / rate for want, rate in zip(offered, rates, strict=True)]
        weights = [self._weight(cell, ue, rate) for ue, rate in zip(cell.ues, rates, strict=True)]
        caps = [
            min(need, cell.prb_caps.get(ue.ue_id, PRB_TOTAL) / PRB_TOTAL)
            for ue, need in zip(cell.ues, needs, strict=True)
        ]
        shares = water_fill(weights, caps)
        ues, ratios, misses = [], [], 0
        for ue, (mcs, bler, sinr), want, rate, share in zip(
            cell.ues, links, offered, rates, shares, strict=True
        ):
            delivered = share * rate
            ue.buffer_kb = min(
                BUFFER_CAPACITY_KB, max(0.0, ue.buffer_kb + (want - delivered) * KB_PER_MBPS_STEP)
            )
            ratio = delivered / want if want > 0 else 1.0
            misses += ratio < SLA_SHARE.get(ue.fiveqi, DEFAULT_SLA_SHARE) - 1e-9
            ratios.append(ratio)
            ues.append({
                "ue_id": ue.ue_id, "5qi": ue.fiveqi, "offered_mbps": round(want, 2),
                "delivered_mbps": round(delivered, 2), "sinr_db": round(sinr, 1), "mcs": mcs,
                "bler": round(bler, 3), "buffer_kb": round(ue.buffer_kb, 1),
            })  # fmt: skip
        demand = sum(needs)
        return {
            "cell_id": cell.cell_id,
            "scheduler": cell.policy,
            "prb_util_dl_p50": round(min(1.0, sum(shares)), 3),
            "prb_util_dl_p99": round(min(1.0, demand * 1.05), 3),
            "prach_collision_rate": round(self._prach(cell), 3),
            "rrc_connected_ues": len(cell.ues),
            "sla_violations_last_window": misses,
            "fairness_jain": round(jain(ratios), 4),
            "ues": ues,
        }

    def _link(self, cell: Cell, ue: UE) -> tuple[int, float, float]:
        """(MCS, BLER, SINR) of a UE's link under the cell's setpoints."""
        sinr = ue.sinr_db + self._sinr_gain(cell, ue)
        best = max(0, min(MCS_TOP, round(sinr + 6)))
        mcs = max(cell.mcs_min, min(cell.mcs_max, best))
        bler = cell.target_bler + 0.08 * max(0, mcs - best)
        if cell.unstable_link_adaptation and not cell.mcs_bounded:
            bler += 0.15  # the unbounded MCS picker oscillates on noisy channel estimates
        return mcs, min(0.9, bler), sinr

    @staticmethod
    def _sinr_gain(cell: Cell, ue: UE) -> float:
        """SINR change from uplink power control (less inter-cell interference with a lower P0, edge UEs
        hurt by a low alpha) and from a handover trigger so loose that edge UEs stay on a weak cell."""
        relief = (DEFAULT_P0_DBM - cell.p0_dbm) * (0.4 if cell.inter_cell_interference else 0.05)
        gain = max(-4.0, min(6.0, relief))
        if cell.alpha < 0.7 and ue.sinr_db < 8:
            gain -= 2.0
        if cell.a3_offset_db > 10 and ue.sinr_db < 8:
            gain -= 0.5 * (cell.a3_offset_db - 10)
        return gain

    @staticmethod
    def _weight(cell: Cell, ue: UE, rate: float) -> float:
        policy = {"PF": 1.0, "RR": 1.0 / rate, "MaxCI": rate**4}[cell.policy]
        return policy * cell.qos_weights.get(ue.fiveqi, 1.0)

    @staticmethod
    def _prach(cell: Cell) -> float:
        """Access collisions: a looser handover trigger (larger offset, longer time-to-trigger) means fewer
        ping-pong re-accesses."""
        factor = 1.0 - 0.05 * (cell.a3_offset_db - DEFAULT_A3_DB) - 0.0003 * (cell.ttt_ms - DEFAULT_TTT_MS)
        return cell.prach_base * max(0.2, min(1.5, factor))


def water_fill(weights: list[float], caps: list[float]) -> list[float]:
    """Shares of one unit split by weight, none above its cap; what a capped one leaves goes to the rest."""
    shares = [0.0] * len(weights)
    open_ = {index for index, weight in enumerate(weights) if weight > 0 and caps[index] > 0}
    left = 1.0
    while open_ and left > 1e-12:
        total = sum(weights[index] for index in open_)
        capped = {index for index in open_ if left * weights[index] / total >= caps[index] - shares[index]}
        if not capped:
            for index in open_:
                shares[index] += left * weights[index] / total
            break
        for index in capped:
            left -= caps[index] - shares[index]
            shares[index] = caps[index]
        open_ -= capped
    return shares


def jain(values: list[float]) -> float:
    if not values or not any(values):
        return 1.0
    return sum(values) ** 2 / (len(values) * sum(value * value for value in values))
