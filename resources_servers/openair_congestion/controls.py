"""The eight tools (seven controls and `noop`): their argument shapes, the guardrail, and their effect.

Two layers, as in NeMo Gym: an argument object that does not have the tool's shape (missing or unknown
keys, wrong types) is a protocol violation, while a well-shaped call with an unsafe or impossible value
(outside the bounds, a cell or UE that does not exist, a PRB cap that starves the UE) is rejected by the
guardrail. An accepted call changes its cell's setpoints for the rest of the episode; applying the same
setpoint again changes nothing.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictFloat, StrictInt, ValidationError

from resources_servers.openair_congestion.sim import MCS_TOP, PRB_TOTAL, Network

A3_OFFSET_RANGE = (-24.0, 24.0)
TTT_MS_VALUES = (0, 40, 64, 80, 100, 128, 160, 256, 320, 480, 512, 640, 1024, 1280, 2560, 5120)
P0_RANGE = (-126.0, 23.0)
ALPHA_VALUES = (0.0, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
Number = StrictInt | StrictFloat


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SchedulerArgs(_Args):
    cell_id: StrictInt
    policy: str


class PrbCapArgs(_Args):
    cell_id: StrictInt
    target: str
    target_id: StrictInt
    max_prb: StrictInt


class McsArgs(_Args):
    cell_id: StrictInt
    mcs_min: StrictInt
    mcs_max: StrictInt
    target_bler: Number


class QosArgs(_Args):
    cell_id: StrictInt
    weights: dict[str, Number]


class AdmissionArgs(_Args):
    cell_id: StrictInt
    accept_threshold_pct: Number
    slice_reservation: dict[str, Any]


class HandoverArgs(_Args):
    cell_id: StrictInt
    a3_offset_db: Number
    ttt_ms: StrictInt


class PowerArgs(_Args):
    cell_id: StrictInt
    p0_dbm: Number
    alpha: Number


class NoopArgs(_Args):
    pass


ARGUMENTS: dict[str, type[_Args]] = {
    "set_scheduler_policy": SchedulerArgs,
    "set_prb_cap": PrbCapArgs,
    "set_mcs_bounds": McsArgs,
    "set_qos_weights": QosArgs,
    "set_admission_policy": AdmissionArgs,
    "set_handover_trigger": HandoverArgs,
    "set_ul_power_control": PowerArgs,
    "noop": NoopArgs,
}
TOOL_NAMES = tuple(ARGUMENTS)


class ProtocolViolation(ValueError):
    """The reply is not exactly one well-shaped call of a known tool."""


class Rejected(ValueError):
    """A well-shaped call the guardrail refuses."""


def parse_call(name: str, arguments: str) -> _Args:
    """The call's arguments in their tool's shape; ProtocolViolation saying why not."""
    model = ARGUMENTS.get(name)
    if model is None:
        raise ProtocolViolation(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
    try:
        return model.model_validate_json(arguments or "{}")
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "arguments"
        raise ProtocolViolation(f"{name}: {where}: {problem['msg']}") from None


def _within(value: float, bounds: tuple[float, float], what: str) -> None:
    if not math.isfinite(value) or not bounds[0] <= value <= bounds[1]:
        raise Rejected(f"{what} {value} is outside {bounds[0]:g}..{bounds[1]:g}")


def apply(network: Network, name: str, args: _Args) -> str:
    """Check the call against the guardrail (Rejected) and apply it; answer what changed."""
    if name == "noop":
        return "no change"
    cell_id = args.cell_id  # type: ignore[attr-defined]
    cell = next((cell for cell in network.cells if cell.cell_id == cell_id), None)
    if cell is None:
        raise Rejected(f"cell {cell_id} does not exist (cells: {[cell.cell_id for cell in network.cells]})")
    if isinstance(args, SchedulerArgs):
        if args.policy not in ("PF", "RR", "MaxCI"):
            raise Rejected(f"policy {args.policy!r} is not one of PF, RR, MaxCI")
        cell.policy = args.policy
        return f"cell {cell_id} scheduler is {args.policy}"
    if isinstance(args, PrbCapArgs):
        if args.target != "ue" or cell.ue(args.target_id) is None:
            raise Rejected(f"cell {cell_id} has no UE {args.target_id} to cap (target must be 'ue')")
        floor = math.ceil(PRB_TOTAL / len(cell.ues))
        if not floor <= args.max_prb <= PRB_TOTAL:
            raise Rejected(f"max_prb {args.max_prb} is outside {floor}..{PRB_TOTAL} for {len(cell.ues)} UEs")
        cell.prb_caps[args.target_id] = args.max_prb
        return f"cell {cell_id} UE {args.target_id} capped at {args.max_prb} PRBs"
    if isinstance(args, McsArgs):
        _within(args.mcs_min, (0, MCS_TOP), "mcs_min")
        _within(args.mcs_max, (args.mcs_min, MCS_TOP), "mcs_max")
        _within(args.target_bler, (0.0, 0.5), "target_bler")
        cell.mcs_min, cell.mcs_max, cell.target_bler = args.mcs_min, args.mcs_max, float(args.target_bler)
        cell.mcs_bounded = args.target_bler <= 0.15
        return f"cell {cell_id} MCS {args.mcs_min}..{args.mcs_max}, target BLER {args.target_bler:g}"
    if isinstance(args, QosArgs):
        weights = {}
        for key, weight in args.weights.items():
            if not key.isdigit() or not 1 <= int(key) <= 127:
                raise Rejected(f"5QI {key!r} is not an integer 1..127")
            _within(weight, (0.0, 10.0), f"weight of 5QI {key}")
            weights[int(key)] = float(weight)
        if not weights:
            raise Rejected("weights needs at least one 5QI")
        cell.qos_weights.update(weights)
        return f"cell {cell_id} QoS weights {dict(sorted(cell.qos_weights.items()))}"
    if isinstance(args, AdmissionArgs):
        if args.accept_threshold_pct != 100 or args.slice_reservation:
            raise Rejected("only accept_threshold_pct 100 with an empty slice_reservation is modelled")
        return f"cell {cell_id} admits every UE (no change)"
    if isinstance(args, HandoverArgs):
        _within(args.a3_offset_db, A3_OFFSET_RANGE, "a3_offset_db")
        if args.ttt_ms not in TTT_MS_VALUES:
            raise Rejected(f"ttt_ms {args.ttt_ms} is not one of {list(TTT_MS_VALUES)}")
        cell.a3_offset_db, cell.ttt_ms = float(args.a3_offset_db), args.ttt_ms
        return f"cell {cell_id} A3 offset {args.a3_offset_db:g} dB, TTT {args.ttt_ms} ms"
    assert isinstance(args, PowerArgs)
    _within(args.p0_dbm, P0_RANGE, "p0_dbm")
    if args.alpha not in ALPHA_VALUES:
        raise Rejected(f"alpha {args.alpha} is not one of {list(ALPHA_VALUES)}")
    cell.p0_dbm, cell.alpha = float(args.p0_dbm), float(args.alpha)
    return f"cell {cell_id} P0 {args.p0_dbm:g} dBm, alpha {args.alpha:g}"
