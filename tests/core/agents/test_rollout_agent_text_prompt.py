"""`text_prompt`: a Responses input as the text messages chat frameworks start from, or a 422 naming the
item that cannot be carried."""

import pytest

from nemo_gym.agents.rollout_agent import text_prompt
from nemo_gym.http.errors import GymError


def test_text_messages_pass_with_their_roles_and_text_parts_joined():
    prompt = [
        {"role": "developer", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
        {"role": "assistant", "content": "c"},
    ]  # fmt: skip
    assert text_prompt(prompt) == [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "ab"},
        {"role": "assistant", "content": "c"},
    ]
    assert text_prompt("hi") == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("item", "named"),
    [
        (
            {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c"},
            "input[1]: only text messages",
        ),
        ({"role": "tool", "content": "x"}, "role 'tool'"),
        ({"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}, "input[1].content"),
    ],
)
def test_anything_but_text_messages_is_refused_naming_the_item(item, named):
    with pytest.raises(GymError) as refused:
        text_prompt([{"role": "user", "content": "q"}, item])
    assert refused.value.status == 422 and named in refused.value.message
