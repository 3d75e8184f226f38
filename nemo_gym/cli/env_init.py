"""`gym init <name>`: scaffold a resources server folder whose own tests and data checks pass at once.

The folder is complete in the sense `gym test` checks: app.py, configs/<name>.yaml (the resources server
and a simple_agent serving its example data), five example tasks with their metrics file and five
placeholder rollouts, README.md and a test that starts the server for real and talks HTTP to it. The
author then replaces the example tasks and the reward rule.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

from nemo_gym.config import server_kinds
from nemo_gym.config.datasets import DatasetConfig
from nemo_gym.config.errors import ConfigError

NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*")
EXAMPLE_QUESTIONS = (
    "What is the capital of France?",
    "How many legs does a spider have?",
    "What colour is a clear daytime sky?",
    "What is 12 times 12?",
    "Which planet is known as the red planet?",
)
EXAMPLE_ANSWERS = ("Paris", "8", "blue", "144", "Mars")


def init_resources_server(given: list[str], overrides: list[str]) -> int:
    """`given`: the positional argument and `--resources-server`; overrides may name the folder as
    `+resources_server=<name>` or, as NeMo Gym's ng_init_resources_server, `+entrypoint=resources_servers/<name>`.
    Every spelling used must name the same folder."""
    name = _name_from(given, overrides)
    folder = Path.cwd() / server_kinds.RESOURCES.key / name
    if folder.exists():
        raise ConfigError(f"{folder} already exists; pick another name or remove it")
    class_name = "".join(part.capitalize() for part in name.split("_"))
    files = {
        "app.py": APP_TEMPLATE.format(name=name, cls=class_name),
        f"configs/{name}.yaml": CONFIG_TEMPLATE.format(name=name),
        "README.md": README_TEMPLATE.format(name=name),
        "requirements.txt": "# extra PyPI packages this environment needs, one per line\n",
        "tests/test_app.py": TEST_TEMPLATE.format(name=name),
        **_example_data(name),
    }
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"Created {folder} ({len(files)} files). Next: gym test +entrypoint=resources_servers/{name}")
    return 0


def _name_from(given: list[str], overrides: list[str]) -> str:
    from nemo_gym.config.overrides import parse_overrides

    settings = parse_overrides(overrides)
    entrypoint = str(settings.get("entrypoint") or "")
    candidates = [
        str(name)
        for name in (*given, settings.get("resources_server"), entrypoint.removeprefix("resources_servers/"))
        if name
    ]
    if entrypoint and not entrypoint.startswith("resources_servers/"):
        raise ConfigError(f"entrypoint '{entrypoint}': gym env init creates resources_servers/<name> only")
    if len(set(candidates)) != 1:
        raise ConfigError(
            "usage: gym env init <name>  (or --resources-server <name>, or +entrypoint=resources_servers/<name>;"
            " a new folder resources_servers/<name> is created)"
        )
    name = candidates[0].strip("/")
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            f"name '{name}': use lowercase letters, digits and underscores, starting with a letter"
        )
    return name


def _example_data(name: str) -> dict[str, str]:
    """Five tasks, their metrics as `gym dataset collate` writes them, and placeholder rollouts."""
    from nemo_gym.datasets.metrics import DatasetMetrics

    rows = [
        {
            "responses_create_params": {"input": [{"role": "user", "content": question}]},
            "expected_answer": answer,
        }
        for question, answer in zip(EXAMPLE_QUESTIONS, EXAMPLE_ANSWERS, strict=True)
    ]
    metrics = DatasetMetrics()
    for number, row in enumerate(rows, start=1):
        metrics.add(row, number, 1)
    dataset = DatasetConfig(
        name="example", type="example", jsonl_fpath=f"resources_servers/{name}/data/example.jsonl"
    )
    metrics_file = json.loads(json.dumps(dataset.model_dump(mode="json") | metrics.summary()))
    rollouts = [
        row | {"response": _placeholder_response(index, answer), "reward": 1.0}
        for index, (row, answer) in enumerate(zip(rows, EXAMPLE_ANSWERS, strict=True))
    ]
    return {
        "data/example.jsonl": "".join(json.dumps(row) + "\n" for row in rows),
        "data/example_metrics.json": json.dumps(metrics_file, indent=4) + "\n",
        "data/example_rollouts.jsonl": "".join(json.dumps(rollout) + "\n" for rollout in rollouts),
    }


def _placeholder_response(index: int, answer: str) -> dict:
    """A Responses API answer standing in for a recorded rollout until `gym collect` records real ones."""
    return {
        "id": f"resp_placeholder_{index}",
        "object": "response",
        "created_at": 0,
        "model": "placeholder",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": f"msg_placeholder_{index}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": answer, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


APP_TEMPLATE = textwrap.dedent(
    '''\
    """{name}: say here what this environment trains and how its reward is computed.

    The scaffold gives every rollout reward 1.0; replace `verify` with the real check (the task row's own
    fields, such as `expected_answer`, arrive in the body next to the model's `response`).
    """

    from nemo_gym.serving.resources_server import (
        BaseResourcesServerConfig,
        BaseVerifyRequest,
        BaseVerifyResponse,
        SimpleResourcesServer,
    )


    class {cls}Config(BaseResourcesServerConfig):
        pass


    class {cls}VerifyRequest(BaseVerifyRequest):
        expected_answer: str


    class {cls}ResourcesServer(SimpleResourcesServer):
        config: {cls}Config

        async def verify(self, body: {cls}VerifyRequest) -> BaseVerifyResponse:
            return BaseVerifyResponse(**body.model_dump(), reward=1.0)


    if __name__ == "__main__":
        {cls}ResourcesServer.run_webserver()
    '''
)

CONFIG_TEMPLATE = textwrap.dedent(
    """\
    {name}_resources_server:
      resources_servers:
        {name}:
          entrypoint: app.py
          domain: other
          verified: false
          description: Describe the tasks of {name}
    {name}_simple_agent:
      responses_api_agents:
        simple_agent:
          entrypoint: app.py
          resources_server:
            type: resources_servers
            name: {name}_resources_server
          model_server:
            type: responses_api_models
            name: policy_model
          datasets:
            - name: example
              type: example
              jsonl_fpath: resources_servers/{name}/data/example.jsonl
    """
)

README_TEMPLATE = textwrap.dedent(
    """\
    # {name}

    Say what this environment trains, what a task looks like and how the reward is computed.

    ## Data

    - `data/example.jsonl`: five example tasks (replace them with real ones).
    - `data/example_metrics.json`: their statistics; refresh with
      `gym dataset collate +config_paths=[resources_servers/{name}/configs/{name}.yaml,<model config>]
      +output_dirpath=/tmp/collate +mode=example_validation`.
    - `data/example_rollouts.jsonl`: placeholders until you record real rollouts with `gym collect`.

    ## Test

    `gym test +entrypoint=resources_servers/{name}` runs `tests/` and checks the example data.
    """
)

TEST_TEMPLATE = textwrap.dedent(
    '''\
    """{name} over HTTP: the server runs as a real process, started from its own app.py."""

    import json
    import urllib.request
    from pathlib import Path

    from nemo_gym.envkit.testing import instance_config, run_instance

    FOLDER = Path(__file__).resolve().parents[1]
    ROLLOUTS = [json.loads(line) for line in (FOLDER / "data" / "example_rollouts.jsonl").read_text().splitlines()]


    def post(url: str, body: dict) -> dict:
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers={{"Content-Type": "application/json"}}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())


    def test_verify_gives_each_recorded_rollout_its_recorded_reward(tmp_path):
        config = {{"{name}": instance_config("resources_servers", "{name}", domain="other")}}
        with run_instance(config, "{name}", tmp_path) as server:
            for rollout in ROLLOUTS:
                assert post(server.url + "/verify", rollout)["reward"] == rollout["reward"]
    '''
)
