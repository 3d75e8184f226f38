"""arena_judge: Arena-Hard v2 judging of the policy's answer against the row's baseline answer.

Two judge calls per rollout with the positions swapped (gen-base: policy = A, base-gen: policy = B), with
a category's own prompt. The reward follows NeMo Gym: 1.0 when the gen-base verdict is a policy win
(`[[A>B]]` or `[[A>>B]]`), else 0.0; `combined_score` shows what both orders say together (the `arena`
folder's mean score), so a judge that favours position A is visible per rollout. The headline metric is
the policy's win rate against the baseline by Bradley-Terry over both calls' battles, with a seeded
bootstrap interval. The pairwise judging and the fit are the `arena` folder's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from fastapi import FastAPI
from pydantic import ConfigDict, Field, PrivateAttr

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.config_types import ConfigError
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.envkit.pass_at_k_metrics import (
    TOKEN_MEANS,
    compute_pass_majority_metrics,
    compute_subset_metrics,
    pass_at_k_key_metrics,
)
from nemo_gym.judge import (
    JUDGE_FAILURE_RATE_KEY,
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from resources_servers.arena.app import ELO_KEYS, check_template, game_fields
from resources_servers.arena.pairwise import PairwiseGame, arena_elo_metrics, judge_both_orders, policy_scores

FOLDER = Path(__file__).resolve().parent
ROOT = FOLDER.parents[1]
STRONG_WEIGHT = 3  # arena-hard-auto counts a strong verdict as three battles
WINS = ("A>>B", "A>B")
LOSSES = ("B>A", "B>>A")


class ArenaJudgeConfig(JudgedEnvConfig):
    judge_prompt_paths: dict[str, str] = {
        "hard_prompt": "resources_servers/arena_judge/prompts/arena.yaml",
        "creative_writing": "resources_servers/arena_judge/prompts/arena_creative.yaml",
    }
    default_category: str = "hard_prompt"
    arena_elo_bootstrap_rounds: int = Field(default=100, ge=1)
    arena_elo_bootstrap_seed: int = 42
    sanitize_generations: bool = False


class ArenaJudgeVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    question: str = ""
    baseline_answer: str = ""
    category: str | None = None
    uid: str | None = None


class ArenaJudgeVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    category: str
    policy_answer: str | None = None
    judgement_gen_base: str | None = None
    judgement_base_gen: str | None = None
    verdict_gen_base: str | None = None
    verdict_base_gen: str | None = None
    invalid_gen_base: bool = False
    invalid_base_gen: bool = False
    combined_score: float | None = None
    games: list[PairwiseGame] = []
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(ArenaJudgeVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


def load_prompt(path: str) -> tuple[str | None, str]:
    """(system, user) of a prompt YAML file (relative paths from the project root, as in NeMo Gym)."""
    full_path = Path(path) if Path(path).is_absolute() else ROOT / path
    try:
        prompt = yaml.safe_load(full_path.read_text(encoding="utf-8"))
        system, user = prompt.get("system"), prompt["user"]
    except OSError as error:
        raise ConfigError(f"judge_prompt_paths: cannot read {full_path} ({error.strerror})") from None
    except (yaml.YAMLError, KeyError, TypeError, AttributeError) as error:
        raise ConfigError(f"judge_prompt_paths: {full_path} needs a `user` prompt: {error!r}") from None
    key = f"judge_prompt_paths ({full_path})"
    return (check_template(system, key) if system else None), check_template(user, key)


def sanitize(text: str) -> str:
    """Without lone surrogate halves and NUL characters, which some judge endpoints refuse."""
    cleaned = json.loads(json.dumps(text).replace("\\u0000", ""))
    return cleaned.encode("utf-8", errors="replace").decode("utf-8")


class ArenaJudgeResourcesServer(JudgedResourcesServer):
    config: ArenaJudgeConfig
    _prompts: dict[str, tuple[str | None, str]] = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._prompts = {
            category: load_prompt(path) for category, path in self.config.judge_prompt_paths.items()
        }
        if self.config.default_category not in self._prompts:
            raise ConfigError(
                f"default_category {self.config.default_category!r} has no prompt in judge_prompt_paths "
                f"({sorted(self._prompts)})"
            )
        return app

    async def verify(self, body: ArenaJudgeVerifyRequest) -> ArenaJudgeVerifyResponse:
        """reward 1.0 when the gen-base call says the policy is better; no answer is 0.0 unjudged."""
        answer = last_assistant_text(body.response) or None
        category = body.category if body.category in self._prompts else self.config.default_category
        graded = {
            **body.model_dump(exclude=GRADING_FIELDS | {"reward"}),
            "category": category,
            "policy_answer": answer,
        }
        if answer is None:
            return ArenaJudgeVerifyResponse(**graded, reward=0.0)
        baseline = body.baseline_answer
        if self.config.sanitize_generations:
            answer, baseline = sanitize(answer), sanitize(baseline)
        system, user = self._prompts[category]
        try:
            games, evaluations = await judge_both_orders(
                self._judge, system, user, body.question, answer, baseline
            )
        except JudgeFailed as failed:
            return ArenaJudgeVerifyResponse(**graded, **self._judge.failure_fields(failed))
        scores = policy_scores(games[0].verdict, True, STRONG_WEIGHT, False)
        scores += policy_scores(games[1].verdict, False, STRONG_WEIGHT, False)
        fields = {
            **game_fields(games),
            "judgement_gen_base": games[0].judge_output,
            "judgement_base_gen": games[1].judge_output,
            "combined_score": sum(scores) / len(scores) if scores else None,
            "judge_evaluations": evaluations,
        }
        if games[0].verdict is None:  # the reward is the gen-base verdict's: it cannot be computed
            failure = JudgeFailure(
                kind="bad_response",
                message="the gen-base judgment has no single verdict label [[A>>B]] .. [[B>>A]]",
                attempts=1,
            )
            return ArenaJudgeVerifyResponse(**graded, **fields, **self._judge.failure_fields(failure))
        return ArenaJudgeVerifyResponse(**graded, **fields, reward=float(games[0].verdict in WINS))

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        graded = [task for task in ([r for r in t if r.get("judge_failure") is None] for t in tasks) if task]
        metrics, *_ = compute_pass_majority_metrics(graded, score_fn=verdict_scores)
        metrics.update(compute_subset_metrics(graded, "category", verdict_scores))
        config = self.config
        metrics.update(
            arena_elo_metrics(
                tasks, STRONG_WEIGHT, config.arena_elo_bootstrap_rounds, config.arena_elo_bootstrap_seed
            )
        )
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return pass_at_k_key_metrics(
            agent_metrics, leading=(*TOKEN_MEANS, *ELO_KEYS, JUDGE_FAILURE_RATE_KEY), best_of=("pass@{k}",)
        )


def verdict_scores(rollout: dict[str, Any]) -> dict[str, float]:
    """The gen-base verdict as wins / strict_wins / ties / losses, and double_wins (both orders agree)."""
    first, second = rollout.get("verdict_gen_base"), rollout.get("verdict_base_gen")
    return {
        "wins": float(first in WINS),
        "strict_wins": float(first == "A>>B"),
        "ties": float(first == "A=B"),
        "losses": float(first in LOSSES),
        "double_wins": float(first in WINS and second in LOSSES),
        "invalid_base_gen": float(second is None),
    }


if __name__ == "__main__":
    ArenaJudgeResourcesServer.run_webserver()
