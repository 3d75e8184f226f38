"""The per-step reward, decomposed into named terms so a trainer (or a person) can see what it paid for.

Delta terms credit the change between the step's KPIs and the previous step's: fewer SLA misses, more
delivered throughput (relative to the cells' capacity), fairer sharing. Level terms charge the congestion
that remains: SLA misses per UE, PRB utilisation above 85 %, access collisions above 5 %, Jain fairness
below 0.8, buffers above 70 % full. A guardrail rejection costs `w_reject` and cannot earn delta credit
(the network moved on without the action). A calm steady network scores 0.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from resources_servers.openair_congestion.sim import BUFFER_CAPACITY_KB

REWARD_VERSION = "openair_v1"
PRB_THRESHOLD = 0.85
ACCESS_THRESHOLD = 0.05
FAIRNESS_TARGET = 0.8
BUFFER_THRESHOLD = 0.7


class RewardWeights(BaseModel):
    """NeMo Gym's term weights; `reward_weights` in the config overrides any of them."""

    model_config = ConfigDict(extra="forbid")
    w_sla: float = Field(default=1.0, ge=0)
    w_tput: float = Field(default=2.0, ge=0)
    w_fair: float = Field(default=5.0, ge=0)
    w_buffer: float = Field(default=0.15, ge=0)
    w_sla_level: float = Field(default=0.8, ge=0)
    w_prb_level: float = Field(default=0.4, ge=0)
    w_access_level: float = Field(default=0.3, ge=0)
    w_fair_level: float = Field(default=0.35, ge=0)
    w_action: float = Field(default=0.0, ge=0)
    w_reject: float = Field(default=0.5, ge=0)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def measurements(kpis: dict[str, Any]) -> dict[str, float]:
    cells = kpis["cells"]
    ues = [ue for cell in cells for ue in cell["ues"]]
    return {
        "sla_violations": float(sum(cell["sla_violations_last_window"] for cell in cells)),
        "aggregate_delivered_mbps": round(sum(ue["delivered_mbps"] for ue in ues), 4),
        "mean_jain_fairness": round(_mean([cell["fairness_jain"] for cell in cells]), 6),
        "prb_pressure": _mean(
            [max(0.0, c["prb_util_dl_p99"] - PRB_THRESHOLD) / (1 - PRB_THRESHOLD) for c in cells]
        ),
        "access_pressure": _mean(
            [max(0.0, c["prach_collision_rate"] - ACCESS_THRESHOLD) / (0.5 - ACCESS_THRESHOLD) for c in cells]
        ),
        "fairness_deficit": _mean(
            [max(0.0, FAIRNESS_TARGET - c["fairness_jain"]) / FAIRNESS_TARGET for c in cells]
        ),
        "buffer_pressure": _mean(
            [max(0.0, ue["buffer_kb"] / BUFFER_CAPACITY_KB - BUFFER_THRESHOLD) for ue in ues]
        ),
        "n_ues": float(max(1, len(ues))),
    }


def breakdown(
    before: dict[str, Any] | None,
    after: dict[str, Any],
    *,
    action: str,
    rejected: bool,
    weights: RewardWeights,
    cell_capacity_mbps: float,
) -> dict[str, Any]:
    """{"version", "measurements", "terms", "total"} for the step from `before` to `after`."""
    now = measurements(after)
    was = measurements(before) if before is not None else now
    d_sla = was["sla_violations"] - now["sla_violations"]
    d_tput = now["aggregate_delivered_mbps"] - was["aggregate_delivered_mbps"]
    d_fair = now["mean_jain_fairness"] - was["mean_jain_fairness"]
    if rejected:
        d_sla, d_tput, d_fair = min(0.0, d_sla), min(0.0, d_tput), min(0.0, d_fair)
    capacity = cell_capacity_mbps * max(1, len(after["cells"]))
    terms = {
        "delta_sla": weights.w_sla * d_sla,
        "delta_tput": weights.w_tput * d_tput / capacity,
        "delta_fair": weights.w_fair * d_fair,
        "level_sla": -weights.w_sla_level * now["sla_violations"] / now["n_ues"],
        "level_prb": -weights.w_prb_level * now["prb_pressure"],
        "level_access": -weights.w_access_level * now["access_pressure"],
        "level_fair": -weights.w_fair_level * now["fairness_deficit"],
        "level_buffer": -weights.w_buffer * now["buffer_pressure"],
        "action": 0.0 if rejected or action == "noop" else -weights.w_action,
        "reject": -weights.w_reject if rejected else 0.0,
    }
    terms = {name: round(value, 6) for name, value in terms.items()}
    measured = {
        **{name: round(value, 6) for name, value in now.items()},
        "delta_sla_violations": d_sla,
        "delta_delivered_mbps": round(d_tput, 4),
        "delta_jain_fairness": round(d_fair, 6),
    }
    return {
        "version": REWARD_VERSION,
        "measurements": measured,
        "terms": terms,
        "total": round(sum(terms.values()), 6),
    }
