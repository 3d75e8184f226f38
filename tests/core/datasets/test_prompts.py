"""nemo_gym.prompt: NeMo Gym's prompt-config API, on small files and rows."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from nemo_gym.config_types import ConfigError
from nemo_gym.global_config import install_root
from nemo_gym.prompt import (
    MaterializePromptsConfig,
    PromptConfig,
    apply_prompt_to_row,
    fill_prompt,
    load_prompt_config,
    materialize_prompts,
    prompted_row,
    validate_prompt_compatibility,
)

QA = PromptConfig(system="Answer in {language}.", user="Q: {question}")


@pytest.fixture(autouse=True)
def fresh_cache():
    load_prompt_config.cache_clear()
    yield
    load_prompt_config.cache_clear()


def test_fill_puts_the_system_message_first_and_fills_both_from_the_row():
    row = {"question": "2+2?", "language": "French", "unused": 1}
    assert fill_prompt(QA, row) == [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Q: 2+2?"},
    ]
    assert fill_prompt(PromptConfig(user="{question}"), row) == [{"role": "user", "content": "2+2?"}]


def test_a_missing_field_is_a_key_error_naming_it_and_the_rows_fields():
    with pytest.raises(KeyError) as raised:
        fill_prompt(QA, {"question": "2+2?", "lang": "fr"})
    message = raised.value.args[0]
    assert "'language'" in message and "['question', 'lang']" in message


def test_doubled_braces_are_literal_as_in_str_format():
    config = PromptConfig(user='Reply as JSON {{"answer": ...}} to {question}')
    assert fill_prompt(config, {"question": "q"})[0]["content"] == 'Reply as JSON {"answer": ...} to q'


def test_validate_lists_every_row_that_already_has_an_input():
    rows = [
        {"responses_create_params": {"input": "hi"}},
        {"question": "q"},
        {"responses_create_params": {"input": []}},  # empty: nothing would be overwritten
        {"responses_create_params": {"temperature": 0.5}},
        {"responses_create_params": {"input": [{"role": "user", "content": "x"}]}},
    ]
    with pytest.raises(ValueError, match=r"rows \[0, 4\] already have responses_create_params.input"):
        validate_prompt_compatibility(rows, QA)
    validate_prompt_compatibility(rows[1:4], QA)


def test_apply_keeps_the_other_params_and_leaves_the_row_alone():
    row = {"question": "q", "language": "en", "responses_create_params": {"temperature": 0.2, "tools": []}}
    before = copy.deepcopy(row)
    applied = apply_prompt_to_row(row, QA)
    assert row == before
    assert applied == {
        **before,
        "responses_create_params": {"temperature": 0.2, "tools": [], "input": fill_prompt(QA, row)},
    }
    assert apply_prompt_to_row({"question": "q", "language": "en"}, QA)["responses_create_params"] == {
        "input": fill_prompt(QA, row)
    }


def test_a_streamed_row_names_its_place_in_config_errors():
    with pytest.raises(ConfigError, match="^data.jsonl:3: the row already has responses_create_params.input"):
        prompted_row({"responses_create_params": {"input": "x"}}, QA, "data.jsonl:3")
    with pytest.raises(ConfigError, match="^data.jsonl:4: prompt_config needs the field 'question'"):
        prompted_row({"language": "en"}, QA, "data.jsonl:4")


def test_load_resolves_relative_paths_from_the_cwd_and_caches(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompt.yaml").write_text("system: Be brief.\nuser: 'Solve {question}'\n")
    loaded = load_prompt_config("prompt.yaml")
    assert loaded == PromptConfig(system="Be brief.", user="Solve {question}")
    (tmp_path / "prompt.yaml").write_text("user: changed\n")
    assert load_prompt_config("prompt.yaml") is loaded, "read once per path"
    load_prompt_config.cache_clear()
    assert load_prompt_config("prompt.yaml") == PromptConfig(user="changed")


def test_load_falls_back_to_the_install_root(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shipped = "resources_servers/simpleqa/prompts/judge.yaml"
    assert load_prompt_config(shipped).user.startswith("You grade answers")
    assert (install_root() / shipped).is_file() and not (tmp_path / shipped).exists()


@pytest.mark.parametrize(
    "text, problem",
    [("user: [unclosed\n", "not valid YAML"), ("system: only\n", "needs a `user` template string")],
)
def test_a_malformed_file_is_a_config_error_naming_it(tmp_path: Path, text: str, problem: str):
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(ConfigError, match=f"prompt_config {tmp_path / 'bad.yaml'}: {problem}"):
        load_prompt_config(str(tmp_path / "bad.yaml"))


def test_materialize_writes_every_row_with_its_prompt_and_the_config_used(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompt.yaml").write_text("user: 'Q: {question}'\n")
    rows = [{"question": "a", "responses_create_params": {"temperature": 0.1}}, {"question": "b"}]
    (tmp_path / "raw.jsonl").write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    materialize_prompts("raw.jsonl", "prompt.yaml", "out/rendered.jsonl")
    written = [orjson.loads(line) for line in (tmp_path / "out/rendered.jsonl").read_bytes().splitlines()]
    used = str(tmp_path / "prompt.yaml")
    assert written == [
        {
            "question": "a",
            "responses_create_params": {"temperature": 0.1, "input": [{"role": "user", "content": "Q: a"}]},
            "prompt_config_used": used,
        },
        {
            "question": "b",
            "responses_create_params": {"input": [{"role": "user", "content": "Q: b"}]},
            "prompt_config_used": used,
        },
    ]


def test_materialize_writes_nothing_when_a_row_is_refused(tmp_path: Path):
    (tmp_path / "prompt.yaml").write_text("user: 'Q: {question}'\n")
    rows = [{"question": "a"}, {"question": "b", "responses_create_params": {"input": "b"}}]
    (tmp_path / "raw.jsonl").write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    output = tmp_path / "out.jsonl"
    with pytest.raises(ValueError, match=r"rows \[1\]"):
        materialize_prompts(str(tmp_path / "raw.jsonl"), str(tmp_path / "prompt.yaml"), str(output))
    (tmp_path / "raw.jsonl").write_bytes(orjson.dumps({"other": 1}) + b"\n")
    with pytest.raises(KeyError, match="question"):
        materialize_prompts(str(tmp_path / "raw.jsonl"), str(tmp_path / "prompt.yaml"), str(output))
    assert not output.exists() and not list(tmp_path.glob(".out.jsonl*"))


def test_the_render_command_config_has_nemo_gyms_fields():
    config = MaterializePromptsConfig(
        input_jsonl_fpath="a.jsonl", prompt_config="p.yaml", output_jsonl_fpath="b"
    )
    assert config.model_dump() == {
        "input_jsonl_fpath": "a.jsonl",
        "prompt_config": "p.yaml",
        "output_jsonl_fpath": "b",
    }


def test_a_judge_prompt_is_found_in_its_folder_and_may_use_only_its_placeholders(tmp_path):
    from nemo_gym.config_types import ConfigError
    from nemo_gym.prompt import load_judge_prompt_file

    (tmp_path / "judge.yaml").write_text("user: 'Is {generation} equal to {expected_answer}? {{keep}}'\n")
    prompt = load_judge_prompt_file(tmp_path, "judge.yaml", ("generation", "expected_answer"))
    assert prompt.user.format(generation="4", expected_answer="4") == "Is 4 equal to 4? {keep}"
    with pytest.raises(ConfigError, match=r"templates may use only \{generation\} and \{answer\}"):
        load_judge_prompt_file(tmp_path, "judge.yaml", ("generation", "answer"))
