"""How fast does `gym view` show a large results file?

Writes a results file of N lines (default 100,000) from the environments' recorded rollouts (each line a
real rollout, stamped with task and rollout indices; about 6 KB a line), starts `gym view` on it and
measures, in the same run:
  - first page: from starting the process to the first answer of `GET /api/rollouts` (50 rows);
  - first paint: in headless Chromium (when installed: `make browser-tools`), from navigation to the
    first 50 rows in the table, with the server started just before;
  - index complete: until `/api/summary` says the whole file is read;
  - a filtered and sorted page, a search and one rollout's detail, once the index is complete;
  - the server's resident memory then.
The baseline is the same page for a 1,000-line file, measured in the same run. Prints a table.

    .venv/bin/python bench/viewer.py [--lines 100000] [--keep FILE]
"""

from __future__ import annotations

import argparse
import glob
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from nemo_gym.testing import chromium_paths, headless_chromium

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GYM = Path(sys.executable).parent / "gym"
DEADLINE_S = 300


def write_results(path: Path, lines: int) -> None:
    recorded = [
        json.loads(line)
        for name in sorted(glob.glob(str(ROOT / "resources_servers/*/data/example_rollouts.jsonl")))
        for line in Path(name).read_text().splitlines()
        if line.strip()
    ]
    chooser = random.Random(0)
    with path.open("w") as out:
        for index in range(lines):
            row = dict(chooser.choice(recorded))
            row |= {
                "_ng_task_index": index // 8,
                "_ng_rollout_index": index % 8,
                "agent_ref": {"name": "agent"},
            }
            out.write(json.dumps(row) + "\n")


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.loads(response.read())


class Viewer:
    """`gym view` on a file; `started` is when the process was launched."""

    def __init__(self, path: Path) -> None:
        self.started = time.perf_counter()
        self.process = subprocess.Popen([str(GYM), "view", str(path)], stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if " at " not in line:
            raise SystemExit(f"gym view did not start: {line!r}")
        self.url = line.split(" at ", 1)[1].split()[0]

    def wait_complete(self) -> float:
        deadline = time.perf_counter() + DEADLINE_S
        while not get_json(self.url + "api/summary")["complete"]:
            if time.perf_counter() > deadline:
                raise SystemExit("the index was not complete within the deadline")
            time.sleep(0.05)
        return time.perf_counter() - self.started

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def timed(work) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def first_page_s(path: Path) -> tuple[float, Viewer]:
    viewer = Viewer(path)
    page = get_json(viewer.url + "api/rollouts?limit=50")
    assert len(page["rows"]) == 50, page
    return time.perf_counter() - viewer.started, viewer


def first_paint_s(path: Path) -> float | None:
    if chromium_paths() is None:
        return None
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with headless_chromium(60) as driver:
        driver.get("about:blank")
        viewer = Viewer(path)
        try:
            started = time.perf_counter()
            driver.get(viewer.url)
            WebDriverWait(driver, 60, poll_frequency=0.02).until(
                lambda d: len(d.find_elements(By.CSS_SELECTOR, "#rollout-table tbody tr[data-id]")) == 50
            )
            return time.perf_counter() - started
        finally:
            viewer.stop()


def measure(path: Path, lines: int) -> dict[str, float | None]:
    figures: dict[str, float | None] = {"lines": lines, "file MB": path.stat().st_size / 2**20}
    figures["first page s"], viewer = first_page_s(path)
    try:
        figures["index complete s"] = viewer.wait_complete()
        api = viewer.url + "api/"
        figures["filtered+sorted page s"] = timed(
            lambda: get_json(api + "rollouts?sort=reward&order=desc&reward_max=0.5&offset=500&limit=50")
        )
        figures["search s"] = timed(lambda: get_json(api + "rollouts?q=San%20Francisco&limit=50"))
        figures["detail s"] = timed(lambda: get_json(api + f"rollouts/{lines // 2}"))
        figures["server RSS MB"] = viewer.rss_mb()
    finally:
        viewer.stop()
    figures["first paint in Chromium s"] = first_paint_s(path)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="write the large file here and keep it")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="gym-bench-viewer-"))
    try:
        runs = []
        for lines, path in (
            (1_000, scratch / "small.jsonl"),
            (args.lines, args.keep or scratch / "large.jsonl"),
        ):
            write_results(path, lines)
            runs.append(measure(path, lines))
        print("| figure | " + " | ".join(f"{run['lines']:,} lines" for run in runs) + " |")
        print("|---|" + "---|" * len(runs))
        for key in runs[0]:
            if key == "lines":
                continue
            cells = ["–" if run[key] is None else f"{run[key]:,.2f}" for run in runs]
            print(f"| {key} | " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
