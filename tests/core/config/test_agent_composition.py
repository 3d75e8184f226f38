"""`--agent-type` (NeMo Gym 0.7's agent composition) and the pairing guards `allowed_agents` /
`allowed_model_types`: the merged config each produces, and one evaluation end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from nemo_gym.config.agent_composition import (
    AgentCompositionError,
    UnsupportedAgentOverrideError,
    UnsupportedAgentPairingError,
    UnsupportedModelPairingError,
)
from nemo_gym.global_config import parse_global_config_dict
from tests.helpers import LAUNCHER_VERDICT_S, REPO_ROOT, one_line_error

BIN = Path(sys.executable).parent
BLACKJACK = str(REPO_ROOT / "resources_servers/blackjack/configs/blackjack.yaml")
SIMPLE_AGENT = str(REPO_ROOT / "responses_api_agents/simple_agent/configs/simple_agent.yaml")
GYMNASIUM_AGENT = str(REPO_ROOT / "responses_api_agents/gymnasium_agent/configs/gymnasium_agent.yaml")
REPLAY = str(REPO_ROOT / "responses_api_models/replay_model/configs/replay_model.yaml")


def parsed(tmp_path: Path, *paths: str, overrides: tuple[str, ...] = (), extra: dict | None = None):
    files = list(paths)
    if extra is not None:
        (tmp_path / "extra.yaml").write_text(yaml.safe_dump(extra))
        files.append(str(tmp_path / "extra.yaml"))
    return parse_global_config_dict(
        [f"+config_paths=[{','.join(files)}]", *overrides], cwd=tmp_path, skip_env_yaml=True
    )


def instances(cfg) -> dict:
    return {
        name: block
        for name, block in OmegaConf.to_container(cfg, resolve=False).items()
        if isinstance(block, dict)
        and {"responses_api_agents", "resources_servers", "environment_servers", "responses_api_models"}
        & set(block)  # fmt: skip
    }


def test_the_unbound_agent_replaces_each_bound_one_keeping_its_environment(tmp_path):
    cfg = parsed(tmp_path, BLACKJACK, SIMPLE_AGENT, REPLAY,
                 overrides=("++blackjack_simple_agent.responses_api_agents.simple_agent.max_steps=3",))  # fmt: skip
    found = instances(cfg)
    assert "simple_agent" not in found and "blackjack_gymnasium_agent" not in found
    agent = found["blackjack_simple_agent"]["responses_api_agents"]["simple_agent"]
    original = yaml.safe_load(Path(BLACKJACK).read_text())["blackjack_gymnasium_agent"]
    inner = original["responses_api_agents"]["gymnasium_agent"]
    assert (agent["resources_server"], agent["model_server"], agent["datasets"]) == (
        inner["resources_server"],
        inner["model_server"],
        inner["datasets"],
    )
    assert agent["entrypoint"] == "app.py" and agent["max_steps"] == 3, (
        "the override reached the composed agent"
    )
    assert cfg.agent_map == {"blackjack_gymnasium_agent": "blackjack_simple_agent"}


def test_environment_servers_follow_the_renamed_agent(tmp_path):
    server = {"environment_servers": {"single_agent_turn": {
        "entrypoint": "app.py",
        "resources_server": {"type": "resources_servers", "name": "blackjack"},
        "agent_server": {"type": "responses_api_agents", "name": "blackjack_gymnasium_agent"},
    }}}  # fmt: skip
    cfg = parsed(tmp_path, BLACKJACK, SIMPLE_AGENT, REPLAY, extra={"blackjack_episodes": server})
    inner = instances(cfg)["blackjack_episodes"]["environment_servers"]["single_agent_turn"]
    assert inner["agent_server"]["name"] == "blackjack_simple_agent"


def test_what_composition_cannot_do_is_refused_naming_it(tmp_path):
    with pytest.raises(AgentCompositionError, match="both have resources_server.name"):
        parsed(tmp_path, BLACKJACK, SIMPLE_AGENT, GYMNASIUM_AGENT, REPLAY)
    with pytest.raises(AgentCompositionError, match="no environment to put it in"):
        parsed(tmp_path, SIMPLE_AGENT, REPLAY)
    with pytest.raises(
        AgentCompositionError, match=r"agent_name=blackjack_gymnasium_agent \(now blackjack_simple_agent\)"
    ):
        parsed(
            tmp_path, BLACKJACK, SIMPLE_AGENT, REPLAY, overrides=("+agent_name=blackjack_gymnasium_agent",)
        )
    replaced = "++blackjack_gymnasium_agent.responses_api_agents.gymnasium_agent.max_steps=3"
    with pytest.raises(UnsupportedAgentOverrideError, match="blackjack_simple_agent"):
        parsed(tmp_path, BLACKJACK, SIMPLE_AGENT, REPLAY, overrides=(replaced,))


def test_allowed_agents_refuses_other_agents_unless_told_to_allow_them(tmp_path, monkeypatch):
    allowed = ("++blackjack.resources_servers.blackjack.allowed_agents=[gymnasium_agent]",)
    with pytest.raises(UnsupportedAgentPairingError) as refused:
        parsed(tmp_path, BLACKJACK, SIMPLE_AGENT, REPLAY, overrides=allowed)
    assert "blackjack (of blackjack_gymnasium_agent) allows gymnasium_agent" in str(refused.value)
    assert "--allow-unsupported-pairing" in str(refused.value)
    cfg = parsed(
        tmp_path, BLACKJACK, SIMPLE_AGENT, REPLAY, overrides=(*allowed, "++allow_unsupported_pairing=true")
    )
    assert "blackjack_simple_agent" in instances(cfg)
    monkeypatch.setenv("NEMO_GYM_ALLOW_UNSUPPORTED_PAIRING", "1")
    assert "blackjack_simple_agent" in instances(
        parsed(tmp_path, BLACKJACK, SIMPLE_AGENT, REPLAY, overrides=allowed)
    )


def test_allowed_model_types_holds_without_composition_and_exempts_dummy_model(tmp_path):
    only_vllm = ("++blackjack.resources_servers.blackjack.allowed_model_types=vllm_model",)
    with pytest.raises(UnsupportedModelPairingError, match="use --model-type vllm_model"):
        parsed(tmp_path, BLACKJACK, REPLAY, overrides=only_vllm)
    dummy = {"policy_model": {"responses_api_models": {"dummy_model": {"entrypoint": "app.py"}}}}
    (tmp_path / "dummy.yaml").write_text(yaml.safe_dump(dummy))
    assert "blackjack" in instances(
        parsed(tmp_path, BLACKJACK, str(tmp_path / "dummy.yaml"), overrides=only_vllm)
    )


def test_eval_run_with_agent_type_routes_the_recorded_rows_to_the_composed_agent(tmp_path):
    """A second agent type (a simple_agent under another folder name), chosen with --agent-type: the
    example rows still name mcqa_simple_agent and reach mcqa_relabelled_agent through agent_map."""
    folder = tmp_path / "responses_api_agents" / "relabelled_agent"
    (folder / "configs").mkdir(parents=True)
    (folder / "app.py").write_text(
        "from responses_api_agents.simple_agent.app import SimpleAgent\n\n"
        "if __name__ == '__main__':\n    SimpleAgent.run_webserver()\n"
    )
    template = yaml.safe_load(Path(SIMPLE_AGENT).read_text())
    (folder / "configs" / "relabelled_agent.yaml").write_text(
        yaml.safe_dump({"relabelled_agent": {"responses_api_agents": {"relabelled_agent": template["simple_agent"]["responses_api_agents"]["simple_agent"]}}})
    )  # fmt: skip
    (tmp_path / "env.yaml").write_text("{}\n")
    output = tmp_path / "out.jsonl"
    result = subprocess.run(
        [str(BIN / "gym"), "eval", "run", "--resources-server", "mcqa", "--agent-type", "relabelled_agent",
         "--model-type", "replay_model", "-o", str(output)],
        cwd=tmp_path, capture_output=True, text=True, timeout=LAUNCHER_VERDICT_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert rows and {row["agent_ref"]["name"] for row in rows} == {"mcqa_relabelled_agent"}
    assert all(isinstance(row["reward"], float) for row in rows)

    no_serve = subprocess.run(
        [str(BIN / "gym"), "eval", "run", "--no-serve", "--agent-type", "relabelled_agent"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "--agent-type" in one_line_error(no_serve)
