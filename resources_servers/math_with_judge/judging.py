"""The judge's side of math_with_judge: its prompt, the two-way comparison, and the per-rollout scores that
tell symbolic accuracy from judge accuracy in the metrics."""

from __future__ import annotations

from typing import Any

from nemo_gym.envkit.judged_env import PromptJudge, final_item_text, first_label
from nemo_gym.judge import JudgeEvaluation
from nemo_gym.reward_profile import is_metric

EQUAL_LABEL = "[[A=B]]"
NOT_EQUAL_LABEL = "[[A!=B]]"

JUDGE_SYSTEM_PROMPT = f"""You compare two answers to the same math problem, written by assistant A and \
assistant B, and decide whether they are mathematically equivalent.

Judge only the mathematical content: the same value written differently (fractions versus decimals, \
factored versus expanded, a different variable order in a set) counts as equivalent. Ignore formatting \
requirements of the problem, wording, units written out or omitted, and any working shown around the answer.

When you have decided, write exactly one of these labels as your final verdict:

1. The answers are equivalent: {EQUAL_LABEL}
2. The answers are not equivalent: {NOT_EQUAL_LABEL}

For example: "Final verdict: not equivalent {NOT_EQUAL_LABEL}"."""

JUDGE_USER_TEMPLATE = """<|Problem|>
{question}

<|Start of Assistant A's Answer|>
{first_answer}
<|End of Assistant A's Answer|>

<|Start of Assistant B's Answer|>
{second_answer}
<|End of Assistant B's Answer|>"""


async def judge_equal(
    judge: PromptJudge,
    question: str,
    expected_answer: str,
    generated: str,
    evaluations: list[JudgeEvaluation],
) -> float:
    """Expected as A and generated as B; only if that is judged equal, again with the two swapped. Each call
    is appended to `evaluations` (raises `JudgeFailed`, keeping the evaluations made before)."""
    for first, second in ((expected_answer, generated), (generated, expected_answer)):
        prompt = JUDGE_USER_TEMPLATE.format(question=question, first_answer=first, second_answer=second)
        judgment = await judge.ask(prompt, system=JUDGE_SYSTEM_PROMPT)
        evaluations.append(judgment.evaluation)
        if (
            first_label(final_item_text(judgment.evaluation.response), (EQUAL_LABEL, NOT_EQUAL_LABEL))
            != EQUAL_LABEL
        ):
            return 0.0
    return 1.0


def rollout_scores(rollout: dict[str, Any]) -> dict[str, float]:
    """Symbolic accuracy always (0 when `library_reward` is not a usable number); judge accuracy only for
    rollouts the judge actually judged (not those whose judgment failed)."""
    library_reward = rollout.get("library_reward")
    scores = {"symbolic_accuracy": float(library_reward) if is_metric(library_reward) else 0.0}
    if rollout.get("judge_evaluations") is not None and rollout.get("judge_failure") is None:
        scores["judge_accuracy"] = float(rollout["reward"])
    return scores
