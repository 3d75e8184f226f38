"""indian_banking: bank customer support with 34 tools over a per-episode database, a simulated customer,
and tau-style grading; a reset/step environment (`nemo_gym.envkit.gymnasium_server`).

Played by gymnasium_agent in its user-simulator mode: `/reset` answers the customer's brief (persona,
goal, what they know, how to open) as the observation, which the agent hands to the user model as private
notes; the policy serves the customer with the tools (`bank.py`), each step running the reply's calls on
the episode's own copy of the bank and answering them through `info["tool_outputs"]`.

The reward is the grade of the database after the episode (`grading.py`): 1.0 when it equals the state the
task's gold actions produce and every `communicate_info` item was told to the customer, else 0.0. Since
the agent ends an episode on the customer's stop marker without another step, every step grades the
episode so far and pays the change of that grade: the rewards of an episode sum to the grade of its last
state, however it ends (stop marker, handoff, an empty reply, the turn caps here or the agent's
`max_steps`).
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, Field, model_validator

from nemo_gym.envkit.gymnasium_server import (
    GymnasiumServer,
    GymnasiumServerConfig,
    StepResult,
    parse_metadata,
)
from nemo_gym.http.errors import GymError
from nemo_gym.openai_utils import NeMoGymResponse
from resources_servers.indian_banking.bank import call_tool
from resources_servers.indian_banking.grading import (
    EvaluationCriteria,
    GoldActionError,
    gold_database,
    grade,
    normalised,
    start_database,
)


class IndianBankingConfig(GymnasiumServerConfig):
    max_user_turns: int = Field(default=8, ge=1, description="customer replies at most; then truncated")
    max_tool_rounds: int = Field(default=12, ge=1, description="tool-calling replies in a row at most")


class ScenarioInstructions(BaseModel):
    domain: str | None = None
    reason_for_call: str = ""
    known_info: str = ""
    unknown_info: str = ""
    task_instructions: str = ""


class UserScenario(BaseModel):
    persona: str = ""
    instructions: ScenarioInstructions = Field(default_factory=ScenarioInstructions)


class BankingTask(BaseModel):
    """NeMo Gym's row fields (the prompt and the 34 tools are in `responses_create_params`)."""

    task_id: str | None = None
    customer: str | None = None
    user_scenario: UserScenario = Field(default_factory=UserScenario)
    evaluation_criteria: EvaluationCriteria
    initial_state: dict[str, Any] = Field(default_factory=dict)
    opening_message: str | None = None

    @model_validator(mode="after")
    def _known_customer(self) -> BankingTask:
        agent_data = (self.initial_state.get("initialization_data") or {}).get("agent_data") or {}
        self.customer = self.customer or agent_data.get("active_customer")
        if not self.customer:
            raise ValueError("customer: no customer id (nor initial_state...agent_data.active_customer)")
        return self


def customer_brief(task: BankingTask) -> str:
    """What the simulated customer is told (never shown to the policy)."""
    scenario = task.user_scenario
    parts = [
        ("Who you are", scenario.persona),
        ("Why you are contacting the bank", scenario.instructions.reason_for_call),
        ("What you know", scenario.instructions.known_info),
        ("What you do not know", scenario.instructions.unknown_info),
        ("How to play it", scenario.instructions.task_instructions),
        ("Your first message (send it as it is)", task.opening_message or ""),
    ]
    return "\n".join(f"{title}: {text}" for title, text in parts if text)


class IndianBankingServer(GymnasiumServer):
    config: IndianBankingConfig

    async def reset(self, metadata: dict[str, Any], session_id: str) -> tuple[str | None, dict[str, Any]]:
        task = parse_metadata(BankingTask, metadata)
        db = start_database(task.initial_state)
        if task.customer not in db["customers"]:
            raise GymError(
                422, "invalid_task", f"row: customer {task.customer!r} is not in the bank's database"
            )
        try:
            gold = gold_database(task.initial_state, task.customer, task.evaluation_criteria)
        except GoldActionError as error:
            raise GymError(422, "invalid_task", f"row: {error}") from error
        state = self.episode_state(session_id)
        state.update(
            db=db,
            gold=normalised(gold),
            customer=task.customer,
            criteria=task.evaluation_criteria,
            said=[],
            paid=0.0,
            customer_turns=0,
            tool_rounds=0,
        )
        return customer_brief(task), {"task_id": task.task_id}

    async def step(self, action: NeMoGymResponse, metadata: dict[str, Any], session_id: str) -> StepResult:
        state = self.episode_state(session_id)
        calls = [item for item in action.output if getattr(item, "type", None) == "function_call"]
        outputs: list[dict[str, str]] = []
        ended_by = None
        for call in calls:
            answer = self._run(state, call.name, call.arguments)
            outputs.append({"call_id": call.call_id, "output": orjson.dumps(answer).decode()})
            if call.name == "transfer_to_human_agents" and "error" not in answer:
                ended_by = "transfer"
                break
        text = action.output_text.strip()
        if calls:
            state["tool_rounds"] += (
                1  # text beside tool calls never reaches the customer (the agent drops it)
            )
            if ended_by is None and state["tool_rounds"] > self.config.max_tool_rounds:
                ended_by = "max_tool_rounds"
        elif not text:
            ended_by = "empty_reply"
        else:
            state["said"].append(text)
            state["tool_rounds"] = 0
            state["customer_turns"] += 1
            if state["customer_turns"] > self.config.max_user_turns:
                ended_by = "max_user_turns"
        graded = grade(state["db"], state["gold"], state["criteria"], "\n".join(state["said"]))
        reward, state["paid"] = graded["reward"] - state["paid"], graded["reward"]
        info: dict[str, Any] = {"tool_outputs": outputs, **graded, "ended_by": ended_by}
        truncated = ended_by in ("max_tool_rounds", "max_user_turns")
        return None, reward, ended_by is not None and not truncated, truncated, info

    @staticmethod
    def _run(state: dict[str, Any], name: str, arguments: str) -> dict[str, Any]:
        try:
            parsed = orjson.loads(arguments or "{}")
        except orjson.JSONDecodeError as error:
            return {"error": f"the arguments of {name} are not valid JSON ({error}); nothing was done"}
        return call_tool(state["db"], state["customer"], name, parsed)


if __name__ == "__main__":
    IndianBankingServer.run_webserver()
