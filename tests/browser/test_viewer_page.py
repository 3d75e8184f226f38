"""The `gym view` page in a real headless Chromium (Debian's chromium + chromium-driver, which
`make test-browser` installs): first paint, filters, one rollout's conversation, the metrics tab, the
`--static` file opened from disk, and a screenshot.

Set GYM_VIEWER_SCREENSHOT=<path.png> to keep the screenshot (docs/viewer.png is made this way)."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import chromium_paths, headless_chromium
from tests.helpers import REPO_ROOT, OutputReader, gym_command

webdriver = pytest.importorskip(
    "selenium.webdriver", reason="selenium is installed by `make .venv/.installed`"
)
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

pytestmark = pytest.mark.skipif(
    chromium_paths() is None,
    reason="Chromium and ChromeDriver are not installed and could not be: `make test-browser` installs Debian's "
    "chromium and chromium-driver with apt-get (needs root or a system that has them)",
)
WAIT_S = 15
DATA = REPO_ROOT / "resources_servers"
SCRIPT_TEXT = "<img src=x onerror=window.hacked=1></script>"


def recorded(folder: str) -> list[dict[str, Any]]:
    path = DATA / folder / "data" / "example_rollouts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_run(folder: Path) -> Path:
    """A run as rollout collection leaves it: results of three environments (multiple-choice answers, tool
    calls, reasoning), a task with two rollouts, token ids on one answer, model text that looks like HTML,
    one rollout that failed for good (with its materialized input) and the aggregate metrics."""
    agents = {
        "mcqa": "mcqa_simple_agent",
        "example_single_tool_call": "tools_simple_agent",
        "math_with_judge": "math_simple_agent",
    }
    rollouts = [(rollout, agent) for folder, agent in agents.items() for rollout in recorded(folder)]
    rollouts.append(copy.deepcopy(rollouts[7]))  # a second rollout of task 7
    tokens = rollouts[8][0]["response"]["output"][-1]
    tokens |= {
        "prompt_token_ids": [101, 2023, 2003],
        "generation_token_ids": [7592, 999],
        "generation_log_probs": [-0.25, -1.5],
    }
    rollouts[0][0]["response"]["output"][-1]["content"][0]["text"] += f"\n{SCRIPT_TEXT}"
    results = [
        {
            **rollout,
            "_ng_task_index": 7 if index == 15 else index,
            "_ng_rollout_index": int(index == 15),
            "agent_ref": {"name": agent},
        }
        for index, (rollout, agent) in enumerate(rollouts)
    ]
    failed_task = len(rollouts)
    asked = {
        "responses_create_params": {"input": [{"role": "user", "content": "A question nobody answered"}]}
    }
    stamp = {
        "_ng_task_index": failed_task,
        "_ng_rollout_index": 0,
        "agent_ref": {"name": "mcqa_simple_agent"},
    }
    failure = stamp | {
        "_ng_failure_class": "timeout",
        "_ng_failure_message": "the rollout passed its deadline",
        "_ng_failure_attempt": 3,
    }
    aggregate = [
        {
            "agent_ref": {"name": "mcqa_simple_agent"},
            "agent_metrics": {"mean/reward": 0.6},
            "key_metrics": {"mean/reward": 0.6},
        }
    ]
    (folder / "rollouts.jsonl").write_text("".join(json.dumps(result) + "\n" for result in results))
    (folder / "rollouts_failures.jsonl").write_text(json.dumps(failure) + "\n")
    (folder / "rollouts_materialized_inputs.jsonl").write_text(json.dumps(asked | stamp) + "\n")
    (folder / "rollouts_aggregate_metrics.json").write_text(json.dumps(aggregate))
    return folder / "rollouts.jsonl"


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `make demo` leaves behind."""
    cwd = tmp_path_factory.mktemp("demo")
    (cwd / "env.yaml").write_text("{}\n")
    result = subprocess.run(gym_command("demo"), cwd=cwd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return cwd / "results/demo/rollouts.jsonl"


@contextmanager
def serving(path: Path) -> Iterator[str]:
    """`gym view <path>` running; its URL."""
    process = subprocess.Popen(
        gym_command("view", str(path)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        line = OutputReader(process).wait_for("Viewing ", 30)
        yield line.split(" at ", 1)[1].split()[0]
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def run_url(run_file: Path) -> Iterator[str]:
    with serving(run_file) as url:
        yield url


@pytest.fixture(scope="module")
def demo_url(demo_file: Path) -> Iterator[str]:
    with serving(demo_file) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with headless_chromium(WAIT_S) as driver:
        yield driver


# ---- reading the page ----------------------------------------------------------------------------------------


def wait(driver: Any, condition: Callable[[Any], Any]) -> Any:
    """`condition` once it holds; the page re-renders lists as answers arrive, so a row may go stale."""
    return WebDriverWait(
        driver, WAIT_S, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,)
    ).until(condition)


def listed(driver: Any) -> list[dict[str, str]]:
    """The rows of the rollout table, by column name."""
    names = [
        cell.text.replace("\n", " ")
        for cell in driver.find_elements(By.CSS_SELECTOR, "#rollout-table thead th")
    ]
    rows = driver.find_elements(By.CSS_SELECTOR, "#rollout-table tbody tr[data-id]")
    return [
        dict(zip(names, (cell.text for cell in row.find_elements(By.TAG_NAME, "td")), strict=True))
        for row in rows
    ]


def list_settles(driver: Any, check: Callable[[list[dict[str, str]]], bool]) -> list[dict[str, str]]:
    """Wait until the list shows what `check` expects (a filter's request is asynchronous)."""
    return wait(driver, lambda d: (rows := listed(d)) and check(rows) and rows)


def type_into(driver: Any, element_id: str, text: str) -> None:
    field = driver.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(text)


def open_row(driver: Any, task: str, rollout: str = "0") -> WebElement:
    for row in driver.find_elements(By.CSS_SELECTOR, "#rollout-table tbody tr[data-id]"):
        cells = row.find_elements(By.TAG_NAME, "td")
        if cells[0].text == task and cells[1].text == rollout:
            row.click()
            return wait(
                driver,
                lambda d: (
                    d.find_element(By.CSS_SELECTOR, "#detail h2").text.startswith(f"Task {task} ")
                    and d.find_element(By.ID, "detail")
                ),
            )
    raise AssertionError(f"task {task} rollout {rollout} is not listed")


def steps(detail: WebElement) -> list[tuple[str, str]]:
    return [
        (step.find_element(By.CLASS_NAME, "step-label").text, step.text)
        for step in detail.find_elements(By.CSS_SELECTOR, ".step")
    ]


# ---- the tests -----------------------------------------------------------------------------------------------


def test_the_demo_results_are_listed_and_readable(browser: Any, demo_url: str, demo_file: Path) -> None:
    browser.get(demo_url)
    rows = list_settles(browser, lambda rows: len(rows) == 5)
    saved = [json.loads(line) for line in demo_file.read_text().splitlines()]
    assert [row["reward"] for row in rows] == [f"{result['reward']:g}" for result in saved]
    assert {row["agent"] for row in rows} == {"mcqa_simple_agent"}
    assert "0.600 mean reward" in browser.find_element(By.ID, "stats").text
    detail = open_row(browser, "2")
    shown = steps(detail)
    assert (
        shown[0][0] == "User"
        and saved[2]["responses_create_params"]["input"][0]["content"][:40] in shown[0][1]
    )
    assert shown[-1][0] == "Final answer"
    verify = detail.find_element(By.CSS_SELECTOR, "table.fields").text
    assert f"expected_answer {saved[2]['expected_answer']}" in verify.replace("\n", " ")


def test_filters_a_rollout_and_the_metrics(browser: Any, run_url: str, run_file: Path) -> None:
    browser.get(run_url)
    rows = list_settles(browser, lambda rows: len(rows) == 17)
    assert "timeout" in rows[-1]["failure"] and rows[-1]["reward"] == "–"

    Select(browser.find_element(By.ID, "filter-failed")).select_by_value("true")
    rows = list_settles(browser, lambda rows: len(rows) < 17)
    assert [(row["task"], row["failure"]) for row in rows] == [("16", "timeout")]
    detail = open_row(browser, "16")
    assert "the rollout passed its deadline" in detail.find_element(By.CLASS_NAME, "failure-box").text
    assert steps(detail) == [("User", "User\nA question nobody answered")]

    browser.find_element(By.ID, "clear-filters").click()
    type_into(browser, "filter-task", "7")
    rows = list_settles(browser, lambda rows: {row["task"] for row in rows} == {"7"})
    assert [row["rollout"] for row in rows] == ["0", "1"]

    type_into(browser, "filter-task", "")
    type_into(browser, "filter-reward-max", "0.5")
    results = [json.loads(line) for line in run_file.read_text().splitlines()]
    low = sorted(str(result["_ng_task_index"]) for result in results if result["reward"] <= 0.5)
    assert 0 < len(low) < len(results)
    list_settles(browser, lambda rows: sorted(row["task"] for row in rows) == low)

    browser.find_element(By.ID, "clear-filters").click()
    type_into(browser, "filter-q", "get_weather")
    rows = list_settles(browser, lambda rows: {row["agent"] for row in rows} == {"tools_simple_agent"})
    assert len(rows) == 6

    detail = open_row(browser, "8")
    shown = steps(detail)
    labels = [label for label, _ in shown]
    assert labels[-3:] == ["Tool call · get_weather", "Tool output · get_weather", "Final answer"]
    assert '"city"' in shown[-3][1]
    tokens = detail.find_element(By.CSS_SELECTOR, ".step.final details.tokens")
    assert "3 prompt / 2 generated token ids" in tokens.text
    tokens.find_element(By.TAG_NAME, "summary").click()
    table = wait(browser, lambda d: tokens.find_element(By.CSS_SELECTOR, "table.tokens"))
    assert "7592 -0.2500" in table.text and "999 -1.5000" in table.text
    screenshot = Path(os.environ.get("GYM_VIEWER_SCREENSHOT") or run_file.with_name("viewer.png"))
    assert browser.save_screenshot(str(screenshot)) and screenshot.stat().st_size > 10_000

    browser.find_element(By.ID, "tab-metrics").click()
    bars = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#task-chart rect.bar"))
    assert len(bars) == 16  # tasks 0-14 and the failed one
    assert "mean/reward" in browser.find_element(By.ID, "aggregate-metrics").text
    bars[7].click()  # task 7: its two rollouts
    rows = list_settles(browser, lambda rows: {row["task"] for row in rows} == {"7"})
    assert len(rows) == 2 and "task=7" in browser.current_url


def test_model_text_is_shown_as_text_never_run(browser: Any, run_url: str) -> None:
    browser.get(run_url)
    list_settles(browser, lambda rows: len(rows) == 17)
    detail = open_row(browser, "0")
    assert SCRIPT_TEXT in steps(detail)[-1][1]
    assert not detail.find_elements(By.TAG_NAME, "img")
    assert browser.execute_script("return window.hacked === undefined")


def test_the_static_file_works_from_disk_without_a_server(
    browser: Any, run_file: Path, tmp_path: Path
) -> None:
    page = tmp_path / "shared.html"
    result = subprocess.run(
        gym_command("view", str(run_file), "--static", str(page)), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    browser.get(page.as_uri())
    rows = list_settles(browser, lambda rows: len(rows) == 17)
    assert rows[0]["task"] == "0"
    Select(browser.find_element(By.ID, "sort")).select_by_value("reward")
    Select(browser.find_element(By.ID, "order")).select_by_value("desc")
    rows = list_settles(browser, lambda rows: rows[0]["reward"] == "1" and rows[-1]["reward"] == "–")
    detail = open_row(browser, "5")
    assert [label for label, _ in steps(detail)][-1] == "Final answer"
    assert not browser.execute_script("return window.hacked")


def test_a_large_file_is_listed_page_by_page(browser: Any, tmp_path: Path, run_file: Path) -> None:
    """A 20,000-line file: pages of 50 rows, the pager counting them all (how soon the first rows show
    is measured by bench/, not here)."""
    lines = run_file.read_text().splitlines()
    big = tmp_path / "big.jsonl"
    with big.open("w") as out:
        for index in range(20_000):
            row = json.loads(lines[index % 16])
            row["_ng_task_index"], row["_ng_rollout_index"] = index // 4, index % 4
            out.write(json.dumps(row) + "\n")
    with serving(big) as url:
        browser.get(url)
        rows = list_settles(browser, lambda rows: len(rows) == 50)
        assert rows[0]["task"] == "0"
        pager = wait(
            browser,
            lambda d: (
                "of 20,000" in d.find_element(By.ID, "pager-info").text
                and d.find_element(By.ID, "pager-info").text
            ),
        )
        assert pager.startswith("1–50 of 20,000")
        browser.find_element(By.ID, "page-next").click()
        wait(browser, lambda d: d.find_element(By.ID, "pager-info").text.startswith("51–100 of 20,000"))
        assert listed(browser)[0]["task"] == "12"


LAPTOP_WINDOW = (1400, 900)


def test_at_laptop_size_the_detail_panel_sits_beside_the_table_with_its_header_in_view(
    browser: Any, run_url: str, run_file: Path
) -> None:
    browser.set_window_size(*LAPTOP_WINDOW)
    try:
        browser.get(run_url)
        list_settles(browser, lambda rows: len(rows) == 17)
        open_row(browser, "8")
        box = "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        box += "return [r.left, r.top, r.right, r.bottom];"
        table = browser.execute_script(box, "#rollout-table")
        detail = browser.execute_script(box, "#detail")
        heading = browser.execute_script(box, "#detail h2")
        assert table[2] <= detail[0], f"the table (right edge {table[2]}) runs under the panel ({detail[0]})"
        viewport = browser.execute_script("return [window.innerWidth, window.innerHeight]")
        assert detail[2] <= viewport[0], "the panel is cut at the window's right edge"
        assert detail[1] <= heading[1] and 0 <= heading[1] and heading[3] <= viewport[1], (
            f"the panel's heading {heading} is not inside the panel {detail} and the window {viewport}"
        )
        screenshot = run_file.with_name("viewer-1400x900.png")
        assert browser.save_screenshot(str(screenshot))
    finally:
        browser.set_window_size(1500, 1000)
