"""nemo_gym.envkit.judged_env: the helpers judged environments share around nemo_gym.judge."""

from __future__ import annotations

from nemo_gym.envkit.judged_env import judged_key_metrics, unusable_unless
from nemo_gym.envkit.pass_at_k_metrics import pass_at_k_key_metrics
from nemo_gym.judge import JUDGE_FAILURE_RATE_KEY
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.testing import message_item, response_with


def judge_answer(*texts: str) -> NeMoGymResponse:
    items = [message_item(text, id=f"msg_{index}") for index, text in enumerate(texts)]
    return NeMoGymResponse.model_validate(response_with(*items))


def yes_or_no(text: str) -> bool | None:
    word = text.strip().upper()
    return {"YES": True, "NO": False}.get(word)


def test_an_answer_the_parser_reads_is_usable_even_when_it_reads_a_falsy_value():
    unusable = unusable_unless(yes_or_no, "has no YES or NO")
    assert unusable(judge_answer("YES")) is None
    assert unusable(judge_answer("no")) is None  # False is a reading; only None refuses


def test_an_unreadable_answer_is_refused_with_its_first_100_characters():
    unusable = unusable_unless(yes_or_no, "has no YES or NO")
    text = "maybe " * 30
    assert unusable(judge_answer(text)) == f"the judge's answer has no YES or NO: {text.strip()[:100]!r}"


def test_only_the_last_assistant_message_counts():
    unusable = unusable_unless(yes_or_no, "is neither yes nor no")
    assert unusable(judge_answer("YES", "perhaps")) == "the judge's answer is neither yes nor no: 'perhaps'"
    assert unusable(judge_answer("perhaps", "YES")) is None


def test_an_answer_without_text_is_refused():
    unusable = unusable_unless(yes_or_no, "has no YES or NO")
    assert (
        unusable(NeMoGymResponse.model_validate(response_with())) == "the judge's answer has no YES or NO: ''"
    )


def test_the_key_metrics_lead_with_token_means_and_judge_failures_then_the_best_pass_at_k():
    agent_metrics = {
        "mean/input_tokens": 10.0,
        "mean/output_tokens": 5.0,
        JUDGE_FAILURE_RATE_KEY: 0.25,
        "mean/reward": 0.5,
        "pass@1[avg-of-2]/accuracy": 0.5,
        "pass@1[avg-of-4]/accuracy": 0.6,
        "pass@2/accuracy": 0.7,
        "pass@4/accuracy": 0.8,
        "pass@4/no_answer": 0.1,
        "majority@4/accuracy": 0.9,
    }
    assert judged_key_metrics(agent_metrics) == {
        "mean/input_tokens": 10.0,
        "mean/output_tokens": 5.0,
        JUDGE_FAILURE_RATE_KEY: 0.25,
        "pass@1[avg-of-4]/accuracy": 0.6,
        "pass@4/accuracy": 0.8,
    }
    assert list(judged_key_metrics(agent_metrics))[:3] == [
        "mean/input_tokens",
        "mean/output_tokens",
        JUDGE_FAILURE_RATE_KEY,
    ]
    assert "majority@4/accuracy" in pass_at_k_key_metrics(agent_metrics)  # the default it narrows
