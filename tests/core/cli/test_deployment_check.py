"""`gym eval health-check` without RUN_DIR: a deployment's servers, models and environments checked before
a long run, on real deployments (the mcqa environment, a replay model or a model server whose upstream is
a closed port); and `gym eval run` stopping before any rollout when the check fails."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nemo_gym.http.upstream import DEFAULT_MAX_ATTEMPTS
from tests.helpers import REPO_ROOT, one_line_error, running_deployment
from tests.helpers import run_gym as gym
from tests.shared_fixtures import closed_port

REPLAY = ("--resources-server", "mcqa", "--model-type", "replay_model")
FIRST_MCQA_ROW = json.loads(
    (REPO_ROOT / "resources_servers/mcqa/data/example.jsonl").read_text().splitlines()[0]
)
AGENT_DATASETS = "++mcqa_simple_agent.responses_api_agents.simple_agent.datasets"
ATTEMPTS = re.compile(r"after (\d+) attempt\(s\)")


def check_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("ok ", "FAILED "))]


def dead_model(port: int) -> tuple[str, ...]:
    return (
        "--resources-server", "mcqa", "--model-type", "openai_model", "--model-url",
        f"http://127.0.0.1:{port}/v1", "--model", "any-model", "--model-api-key", "sk-health-secret",
    )  # fmt: skip


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "env.yaml").write_text("{}\n")
    return tmp_path


def test_a_healthy_deployment_passes_every_check(workdir):
    result = gym("eval", "health-check", *REPLAY, cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert check_lines(result.stdout) == [
        "ok server head_server: answers",
        "ok server mcqa: answers",
        "ok server mcqa_simple_agent: answers",
        "ok server policy_model: answers",
        "ok model policy_model: answers (replays recorded turns only)",
        "ok environment mcqa_simple_agent: first example row verified (reward 1)",
    ]
    assert "Health check passed." in result.stdout

    as_json = gym("eval", "health-check", *REPLAY, "--json", cwd=workdir)
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout[as_json.stdout.index("{\n") :])
    assert report["ok"] is True
    assert {(c["kind"], c["name"]) for c in report["checks"]} >= {
        ("model", "policy_model"),
        ("environment", "mcqa_simple_agent"),
    }


def test_an_environment_grading_cohorts_of_rollouts_is_not_probed_with_a_lone_rollout(workdir):
    """genrm_compare grades the rollouts of one prompt together: a single probe would wait for siblings
    that never come (and join the run's first cohort), so the check says why it skips the environment."""
    replay = ("--resources-server", "genrm_compare", "--model-type", "replay_model")
    result = gym("eval", "health-check", *replay, cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    (environment,) = [line for line in check_lines(result.stdout) if " environment " in line]
    assert environment.startswith("ok environment genrm_compare_simple_agent: skipped: its resources server "
                                  "grades cohorts of 5 rollouts of one prompt"), environment  # fmt: skip


def test_a_dead_model_fails_at_once_naming_the_model_server_and_its_upstream(workdir):
    port = closed_port()
    result = gym("eval", "health-check", *dead_model(port), cwd=workdir)
    assert result.returncode == 1, result.stdout + result.stderr
    failed = [line for line in check_lines(result.stdout) if line.startswith("FAILED")]
    assert len(failed) == 1, result.stdout
    assert failed[0].startswith("FAILED model policy_model: answered HTTP 502")
    assert f"http://127.0.0.1:{port}/v1/responses: cannot connect" in failed[0]
    # One probe: at most the model server's own attempts for one call, no rollout retried on top of it.
    assert 1 <= int(ATTEMPTS.search(failed[0])[1]) <= DEFAULT_MAX_ATTEMPTS
    assert "environment checks not run" in result.stdout
    assert "sk-health-secret" not in result.stdout + result.stderr


UNGRADABLE_ROW = json.dumps({key: value for key, value in FIRST_MCQA_ROW.items() if key != "expected_answer"})


@pytest.mark.parametrize(
    ("first_line", "causes"),
    [
        (UNGRADABLE_ROW, ("its first example row failed", "/verify", "expected_answer: Field required")),
        ("{not json", ("the first row of", "bad.jsonl is not a JSON object")),
    ],
    ids=["verify-refuses-it", "not-json"],
)
def test_an_environment_whose_first_row_cannot_be_verified_is_named(workdir, first_line, causes):
    (workdir / "bad.jsonl").write_text(first_line + "\n")
    datasets = f"{AGENT_DATASETS}=[{{name: example, type: example, jsonl_fpath: bad.jsonl}}]"
    with running_deployment(["+config_paths=[configs/demo.yaml]", datasets], cwd=workdir) as deployment:
        head = "++head_server.port=" + deployment.head_url.rsplit(":", 1)[1]
        result = gym("eval", "health-check", "--no-serve", head, cwd=workdir)
    assert result.returncode == 1, result.stdout + result.stderr
    failed = [line for line in check_lines(result.stdout) if line.startswith("FAILED")]
    assert len(failed) == 1, result.stdout
    assert failed[0].startswith("FAILED environment mcqa_simple_agent: ")
    assert all(cause in failed[0] for cause in causes), failed[0]


def test_a_benchmark_first_row_is_tried_with_its_prompt_config(workdir):
    """A benchmark's rows carry no model input: its prompt config makes it, for the check as for a run."""
    row = {key: FIRST_MCQA_ROW[key] for key in ("options", "expected_answer")} | {"problem": "Pick one."}
    (workdir / "bench.jsonl").write_text(json.dumps(row) + "\n")
    (workdir / "prompt.yaml").write_text("user: '{problem} {topic}'\n")
    entry = "{name: bench, type: benchmark, jsonl_fpath: bench.jsonl, prompt_config: prompt.yaml, prepare_script: p.py}"
    with running_deployment(
        ["+config_paths=[configs/demo.yaml]", f"{AGENT_DATASETS}=[{entry}]"], cwd=workdir
    ) as deployment:
        head = "++head_server.port=" + deployment.head_url.rsplit(":", 1)[1]
        result = gym("eval", "health-check", "--no-serve", head, cwd=workdir)
    assert result.returncode == 1, result.stdout + result.stderr
    failed = [line for line in check_lines(result.stdout) if line.startswith("FAILED")]
    assert len(failed) == 1 and failed[0].startswith("FAILED environment mcqa_simple_agent: "), result.stdout
    assert "bench.jsonl:1: " in failed[0] and "topic" in failed[0], failed[0]


def test_eval_run_stops_before_any_rollout_when_the_check_fails(workdir):
    result = gym(
        "eval", "run", *dead_model(closed_port()), "--dataset", "example", "-o", "r/r.jsonl", cwd=workdir
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert any(line.startswith("FAILED model policy_model:") for line in result.stdout.splitlines())
    assert "Stopped before collecting" in result.stdout
    assert not (workdir / "r/r.jsonl").exists() and not (workdir / "r/r_failures.jsonl").exists()


def test_eval_run_with_no_health_check_goes_straight_to_collecting(workdir):
    result = gym(
        "eval", "run", *dead_model(closed_port()), "--dataset", "example", "--limit", "1", "-o", "r/r.jsonl",
        "--no-health-check", cwd=workdir, env={"NEMO_GYM_MAX_ROLLOUT_ATTEMPTS": "1"},
    )  # fmt: skip
    assert not check_lines(result.stdout) and "Health check" not in result.stdout, result.stdout
    failures = [json.loads(line) for line in (workdir / "r/r_failures.jsonl").read_text().splitlines()]
    assert len(failures) == 1, "the rollout ran (and failed on the dead model) without a check first"
    assert not (workdir / "r/quality_summary.json").exists()


def test_a_healthy_eval_run_checks_then_collects(workdir):
    result = gym("eval", "run", *REPLAY, "--dataset", "example", "-o", "r/r.jsonl", cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines.index("Health check passed.") < next(
        i for i, line in enumerate(lines) if line.startswith("Ran ")
    )
    assert len((workdir / "r/r.jsonl").read_text().splitlines()) == 5
    # then NeMo Gym 0.7's rollout health checks judge what was collected
    summary = json.loads((workdir / "r/quality_summary.json").read_text())
    assert summary["verdicts"] == {"healthy": 5, "unhealthy": 0, "unobserved": 0}
    assert "Rollout health of r/r.jsonl: 5 rollout(s): 5 healthy" in result.stdout


def test_eval_aggregate_checks_the_merged_results_unless_disabled(workdir):
    with running_deployment(["+config_paths=[configs/demo.yaml]"], cwd=workdir) as deployment:
        head = "++head_server.port=" + deployment.head_url.rsplit(":", 1)[1]
        run = gym("eval", "run", "--no-serve", "--dataset", "example", "-o", "a/r.jsonl", head, cwd=workdir)
        assert run.returncode == 0, run.stdout + run.stderr
        (workdir / "a/quality_summary.json").unlink()
        merged = gym(
            "eval", "aggregate", "-i", "a/*.jsonl", "-o", "m/all.jsonl", "--merge-shards", head, cwd=workdir
        )
        skipped = gym(
            "eval",
            "aggregate",
            "-i",
            "a/r.jsonl",
            "-o",
            "s/all.jsonl",
            "--no-health-check",
            head,
            cwd=workdir,
        )
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "Aggregated 5 result(s) from 1 file(s)" in merged.stdout, "the verdicts file is no shard"
    assert json.loads((workdir / "m/quality_summary.json").read_text())["num_rollouts"] == 5
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert not (workdir / "s/quality_summary.json").exists() and "Rollout health" not in skipped.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--workers", "2"), "--workers need a RUN_DIR"),
        (
            ("--no-serve", "--model-type", "replay_model"),
            "gym eval health-check: --no-serve uses the running",
        ),
    ],
)
def test_command_line_mistakes_are_one_line(workdir, args, message):
    result = gym("eval", "health-check", *args, cwd=workdir)
    assert result.returncode == 2
    assert message in one_line_error(result)


def test_no_running_deployment_is_one_line(workdir):
    result = gym("eval", "health-check", "--no-serve", f"++head_server.port={closed_port()}", cwd=workdir)
    assert result.returncode == 1
    assert "Could not connect to the head server" in one_line_error(result)
