"""openair_congestion: steer a congested 5G network one tool call per turn, a reset/step environment.

Each turn the policy reads the cells' and UEs' KPIs and makes exactly one call of the eight tools (seven
bounded controls and `noop`); the step applies it to a small deterministic simulator (sim.py), moves the
network one step on, and pays a decomposed KPI reward (reward.py). A reply that is not exactly one
well-shaped call is a protocol violation: the step runs as `noop` and adds `protocol_violation_penalty`,
so malformed output never ends a congested episode early. A well-shaped call with an unsafe value is
rejected by the guardrail (controls.py) and costs `w_reject`. The episode ends truncated after the row's
`max_steps` turns; the rollout's reward is the sum of the step rewards.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from nemo_gym.envkit.gymnasium_server import (
    EpisodeStore,
    GymnasiumServer,
    GymnasiumServerConfig,
    StepResult,
    parse_metadata,
)
from nemo_gym.openai_utils import NeMoGymResponse
from resources_servers.openair_congestion.controls import ProtocolViolation, Rejected, apply, parse_call
from resources_servers.openair_congestion.reward import RewardWeights, breakdown
from resources_servers.openair_congestion.sim import REGIMES, Network


class OpenAirConfig(GymnasiumServerConfig):
    """NeMo Gym's keys; `pool_size` and `session_ttl_s` bound the episodes kept (the base's store)."""

    backend: Literal["replay"] = Field(default="replay", description="only the causal synthetic backend")
    pool_size: int = Field(default=32, ge=1, description="episodes kept at once; the least recently used go")
    max_steps_default: int = Field(
        default=60, ge=1, description="the simulator's horizon: no episode is longer"
    )
    agent_max_steps: int = Field(default=16, ge=1, description="turns of a row without max_steps")
    session_ttl_s: float = Field(default=3600.0, gt=0, description="an episode idle this long is dropped")
    protocol_violation_penalty: float = Field(default=-1.0, lt=0, ge=-1e6)
    reward_weights: RewardWeights = Field(default_factory=RewardWeights)
    cell_capacity_mbps: float = Field(default=60.0, gt=0, le=10_000)


class CongestionTask(BaseModel):
    """NeMo Gym's row fields; difficulty and regime shape the scenario and are never shown to the policy."""

    seed: int = Field(default=0, ge=0)
    max_steps: int | None = Field(default=None, ge=1)
    difficulty: float = Field(default=0.5, ge=0.0, le=1.0)
    tier: Literal["replay"] = "replay"
    scenario_id: str | None = None
    regime_mix: dict[str, float] | None = None

    @field_validator("scenario_id")
    @classmethod
    def _known_scenario(cls, scenario_id: str | None) -> str | None:
        if scenario_id is not None and scenario_id not in REGIMES:
            raise ValueError(f"scenario_id must be a regime: {', '.join(REGIMES)}")
        return scenario_id

    @model_validator(mode="after")
    def _a_distribution(self) -> CongestionTask:
        mix = self.regime_mix or {}
        unknown = set(mix) - set(REGIMES)
        if unknown:
            raise ValueError(f"regime_mix: unknown regimes {sorted(unknown)}; known: {', '.join(REGIMES)}")
        if mix and (
            any(not 0 <= weight <= 1 for weight in mix.values()) or abs(sum(mix.values()) - 1) > 1e-3
        ):
            raise ValueError("regime_mix: weights in 0..1 summing to 1")
        return self

    def regime(self) -> str:
        """The scenario's regime: `scenario_id`, else drawn from `regime_mix` by the seed, else by the seed."""
        if self.scenario_id:
            return self.scenario_id
        rng = random.Random(self.seed)
        if self.regime_mix:
            names = sorted(self.regime_mix)
            return rng.choices(names, [self.regime_mix[name] for name in names])[0]
        return rng.choice(REGIMES)


class OpenAirCongestionServer(GymnasiumServer):
    config: OpenAirConfig

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        self._episodes = EpisodeStore(self.config.pool_size, self.config.session_ttl_s)

    async def reset(self, metadata: dict[str, Any], session_id: str) -> tuple[str | None, dict[str, Any]]:
        task = parse_metadata(CongestionTask, metadata)
        steps = min(task.max_steps or self.config.agent_max_steps, self.config.max_steps_default)
        network = Network.scenario(
            task.seed, task.regime(), task.difficulty, steps, self.config.cell_capacity_mbps
        )
        kpis = network.start()
        self.episode_state(session_id).update(network=network, kpis=kpis, steps=steps, score=0.0)
        return render(kpis, steps), {"steps": steps}

    async def step(self, action: NeMoGymResponse, metadata: dict[str, Any], session_id: str) -> StepResult:
        state = self.episode_state(session_id)
        network: Network = state["network"]
        calls = [item for item in action.output if getattr(item, "type", None) == "function_call"]
        status, name, note = "protocol_violation", "noop", ""
        try:
            if len(calls) != 1:
                raise ProtocolViolation(f"expected exactly one tool call, got {len(calls)}")
            name = calls[0].name
            note = apply(network, name, parse_call(name, calls[0].arguments))
            status = "accepted"
        except ProtocolViolation as problem:
            name, note = "noop", f"{problem}; played noop"
        except Rejected as problem:
            status, note = "rejected", str(problem)
        kpis = network.advance()
        paid = breakdown(
            state["kpis"],
            kpis,
            action=name,
            rejected=status == "rejected",
            weights=self.config.reward_weights,
            cell_capacity_mbps=self.config.cell_capacity_mbps,
        )
        if status == "protocol_violation":
            paid["terms"]["protocol"] = self.config.protocol_violation_penalty
            paid["total"] = round(paid["total"] + self.config.protocol_violation_penalty, 6)
        state["kpis"] = kpis
        state["score"] = round(state["score"] + paid["total"], 6)
        report = f"{status}: {note}"
        outputs = [{"call_id": call.call_id, "output": report} for call in calls]
        info = {
            "tool_outputs": outputs,
            "action": name,
            "action_status": status,
            "reward_breakdown": paid,
            "step": kpis["step"],
            "episode_return": state["score"],
        }
        done = kpis["step"] >= state["steps"]
        observation = None if done else f"Last action {report}.\n\n{render(kpis, state['steps'])}"
        return observation, paid["total"], False, done, info


def render(kpis: dict[str, Any], steps: int) -> str:
    """The telemetry the policy reads: per cell, then per UE (no regime or difficulty labels)."""
    lines = [f"Step {kpis['step']} of {steps}. Telemetry of the last 5 s window:"]
    for cell in kpis["cells"]:
        lines.append(
            f"Cell {cell['cell_id']}: scheduler {cell['scheduler']}, PRB use p50 {cell['prb_util_dl_p50']:.2f} "
            f"p99 {cell['prb_util_dl_p99']:.2f}, PRACH collisions {cell['prach_collision_rate']:.3f}, "
            f"SLA misses {cell['sla_violations_last_window']}/{cell['rrc_connected_ues']} UEs, "
            f"Jain fairness {cell['fairness_jain']:.3f}"
        )
        for ue in cell["ues"]:
            lines.append(
                f"  UE {ue['ue_id']} (5QI {ue['5qi']}): offered {ue['offered_mbps']:.2f} Mbps, delivered "
                f"{ue['delivered_mbps']:.2f}, SINR {ue['sinr_db']:.1f} dB, MCS {ue['mcs']}, BLER {ue['bler']:.3f}, "
                f"buffer {ue['buffer_kb']:.0f} KB"
            )
    lines.append("Make exactly one tool call: a control, or noop to keep the current setpoints.")
    return "\n".join(lines)


if __name__ == "__main__":
    OpenAirCongestionServer.run_webserver()
