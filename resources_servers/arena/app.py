"""arena: LMArena-style pairwise judging of the policy's answer against a baseline answer saved in the row.

The judge plays two games with the answers' positions swapped; the reward is the policy's mean score over
the scores both games give (win 1, tie 0.5, loss 0; a strong `>>` verdict counts `verdict_weight` times),
so a judge that always favours position A gives 0.5, not a win. A malformed verdict gives no score and is
flagged (`invalid_gen_base` / `invalid_base_gen`); when neither game gives a score because of one, or a
judge call fails, the rollout carries `judge_failure` instead of a grade.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.config_types import ConfigError
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.envkit.pass_at_k_metrics import (
    TOKEN_MEANS,
    compute_pass_majority_metrics,
    pass_at_k_key_metrics,
)
from nemo_gym.judge import (
    JUDGE_FAILURE_RATE_KEY,
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from resources_servers.arena.pairwise import (
    BOTH_BAD,
    PairwiseGame,
    arena_elo_metrics,
    judge_both_orders,
    policy_scores,
)

TEMPLATE_FIELDS = ("question", "answer_a", "answer_b", "answer_1", "answer_2")
ELO_KEYS = ("arena_elo/score", "arena_elo/ci_lower", "arena_elo/ci_upper", "arena_elo/invalid_scores")


class ArenaConfig(JudgedEnvConfig):
    judge_prompt_template: str
    judge_system_message: str
    judge_system_message_by_category: dict[str, str] = {}
    verdict_weight: int = Field(default=3, ge=1)
    score_both_bad_as_tie: bool = False
    generation_only: bool = False
    bootstrap_rounds: int = Field(default=100, ge=1)
    bootstrap_seed: int = 42


class ArenaVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    question_id: str | None = None
    question: str = ""
    baseline_answer: str = ""
    baseline_model: str | None = None
    category: str | None = None


class ArenaVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    policy_answer: str | None = None
    games: list[PairwiseGame] = []
    verdict_gen_base: str | None = None
    verdict_base_gen: str | None = None
    invalid_gen_base: bool = False
    invalid_base_gen: bool = False
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(ArenaVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


def check_template(template: str, key: str) -> str:
    """A template must fill with {question}, {answer_a}, {answer_b} (or {answer_1}, {answer_2}): checked at
    start, not on every verify."""
    try:
        template.format_map(dict.fromkeys(TEMPLATE_FIELDS, ""))
    except (KeyError, IndexError, ValueError) as error:
        raise ConfigError(
            f"{key}: use only {{question}}, {{answer_a}} and {{answer_b}} (literal braces doubled): {error!r}"
        ) from None
    return template


def game_fields(games: list[PairwiseGame]) -> dict[str, Any]:
    first, second = games
    return {
        "games": games,
        "verdict_gen_base": first.verdict,
        "verdict_base_gen": second.verdict,
        "invalid_gen_base": first.verdict is None,
        "invalid_base_gen": second.verdict is None,
    }


class ArenaResourcesServer(JudgedResourcesServer):
    config: ArenaConfig

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        check_template(self.config.judge_prompt_template, "judge_prompt_template")
        check_template(self.config.judge_system_message, "judge_system_message")
        for category, message in self.config.judge_system_message_by_category.items():
            check_template(message, f"judge_system_message_by_category.{category}")
        return app

    async def verify(self, body: ArenaVerifyRequest) -> ArenaVerifyResponse:
        """reward: the policy's mean score over both games; no answer is 0.0 without asking the judge."""
        answer = last_assistant_text(body.response) or None
        graded = {**body.model_dump(exclude=GRADING_FIELDS | {"reward"}), "policy_answer": answer}
        if answer is None or self.config.generation_only:
            return ArenaVerifyResponse(**graded, reward=0.0)
        system = self.config.judge_system_message_by_category.get(body.category or "") or (
            self.config.judge_system_message
        )
        try:
            games, evaluations = await judge_both_orders(
                self._judge,
                system,
                self.config.judge_prompt_template,
                body.question,
                answer,
                body.baseline_answer,
                allow_both_bad=True,
            )
        except JudgeFailed as failed:
            return ArenaVerifyResponse(**graded, **self._judge.failure_fields(failed))
        fields = {**game_fields(games), "judge_evaluations": evaluations}
        weight, as_tie = self.config.verdict_weight, self.config.score_both_bad_as_tie
        scores = policy_scores(games[0].verdict, True, weight, as_tie)
        scores += policy_scores(games[1].verdict, False, weight, as_tie)
        if scores:
            return ArenaVerifyResponse(**graded, **fields, reward=sum(scores) / len(scores))
        if all(game.verdict == BOTH_BAD for game in games):  # a judgment: both answers are bad
            return ArenaVerifyResponse(**graded, **fields, reward=0.0)
        failure = JudgeFailure(
            kind="bad_response",
            message="no score from either order: a verdict label [[A>>B]] .. [[B>>A]] is missing or ambiguous",
            attempts=len(games),
        )
        return ArenaVerifyResponse(**graded, **fields, **self._judge.failure_fields(failure))

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        graded = [[r for r in task if r.get("judge_failure") is None] for task in tasks]
        metrics, *_ = compute_pass_majority_metrics([task for task in graded if task], score_fn=arena_scores)
        config = self.config
        elo = arena_elo_metrics(tasks, config.verdict_weight, config.bootstrap_rounds, config.bootstrap_seed)
        return {**metrics, **elo}

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return pass_at_k_key_metrics(
            agent_metrics, leading=(*TOKEN_MEANS, *ELO_KEYS, JUDGE_FAILURE_RATE_KEY), best_of=("pass@{k}",)
        )


def arena_scores(rollout: dict[str, Any]) -> dict[str, float]:
    """Per rollout: the reward (`score`), and whether both orders agree the policy won or lost."""
    first, second = rollout.get("verdict_gen_base"), rollout.get("verdict_base_gen")
    won = first in ("A>>B", "A>B") and second in ("B>A", "B>>A")
    lost = first in ("B>A", "B>>A") and second in ("A>>B", "A>B")
    return {
        "score": float(rollout.get("reward", 0.0)),
        "double_wins": float(won),
        "double_losses": float(lost),
    }


if __name__ == "__main__":
    ArenaResourcesServer.run_webserver()
