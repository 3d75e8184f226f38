"""scicode's prepare script against a local Hugging Face Hub (problems in SciCode's layout), a local file
host standing for GitHub (the code of a step SciCode gives rather than asks for) and a test_data.h5 made
here and named by SCICODE_TEST_DATA (the manual step), then its rows through `gym eval run` offline: each
sub-step's tests run in the sandbox against those targets."""

from pathlib import Path

import h5py
import numpy as np
import pytest

from benchmarks.scicode.prepare import GIVEN_STEP_URL, TEST_DATA_ENV
from tests.benchmark_checks import check_benchmark, hub_files_from_rows
from tests.helpers import run_gym


def step(number: str, header: str, tests: list[str], background: str = "") -> dict:
    return {"step_number": number, "step_description_prompt": f"Write {header.split('(')[0][4:]}.",
            "step_background": background, "function_header": header, "test_cases": tests,
            "return_line": "    return result", "ground_truth_code": None}  # fmt: skip


PROBLEMS = [
    {"problem_id": "5", "problem_name": "squares", "required_dependencies": "import numpy as np",
     "sub_steps": [step("5.1", "def square(x):", ["assert np.allclose(square(3.0), target)"], "x*x is the area."),
                   step("5.2", "def sum_squares(xs):", ["assert np.allclose(sum_squares(np.arange(4)), target)"])]},
    {"problem_id": "62", "problem_name": "scaled", "required_dependencies": "import numpy as np",
     "sub_steps": [step("62.1", "def scale(x):", []),
                   step("62.2", "def doubled_scale(x):", ["assert np.allclose(doubled_scale(2.0), target)"])]},
    {"problem_id": "7", "problem_name": "cube", "required_dependencies": "import numpy as np",
     "sub_steps": [step("7.1", "def cube(x):", ["assert np.allclose(cube(2.0), target)"])]},
]  # fmt: skip
TARGETS = {"5.1/test1": 9.0, "5.2/test1": 14.0, "62.2/test1": 20.0, "7.1/test1": 8.0}
GIVEN = "def scale(x):\n    return 5 * x\n"
RIGHT = {
    "5": "def square(x):\n    return x * x\n\ndef sum_squares(xs):\n    return float(sum(square(x) for x in xs))",
    "62": "def doubled_scale(x):\n    return 2 * scale(x)",
}
WRONG = "```python\ndef cube(x):\n    return 3 * x\n```"


def write_targets(path: Path) -> Path:
    """SciCode's layout: `<step>/test<i>/var1` holds the i-th test's target."""
    with h5py.File(path, "w") as out:
        for key, value in TARGETS.items():
            out.create_group(key).create_dataset("var1", data=np.float64(value))
    return path


def test_prepares_the_problems_and_scores_them_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEST_DATA_ENV, str(write_targets(tmp_path / "targets.h5")))
    staged = tmp_path / "benchmarks" / "scicode" / "data" / "test_data.h5"
    rows = check_benchmark(
        "scicode",
        hub_files_from_rows("data/test-00000-of-00001.jsonl", PROBLEMS),
        lambda row: f"```python\n{RIGHT[row['problem_id']]}\n```",
        WRONG,
        tmp_path,
        url_files={GIVEN_STEP_URL.format(step="62.1"): GIVEN.encode()},
        run_overrides=[
            f"++scicode_benchmark_resources_server.resources_servers.scicode.test_data_fpath={staged}"
        ],
    )
    assert [[s["step_number"] for s in row["sub_steps"]] for row in rows] == [
        ["5.1", "5.2"],
        ["62.2"],
        ["7.1"],
    ]
    assert rows[1]["required_dependencies"] == "import numpy as np\n\n" + GIVEN.strip()
    prompts = [row["responses_create_params"]["input"][0]["content"] for row in rows]
    assert "Background: x*x is the area." in prompts[0] and GIVEN.strip() in prompts[1]
    assert staged.read_bytes() == (tmp_path / "targets.h5").read_bytes()


def test_without_the_test_data_the_prepare_names_the_manual_step(tmp_path: Path) -> None:
    prepared = run_gym("eval", "prepare", "--benchmark", "scicode", cwd=tmp_path, env={TEST_DATA_ENV: ""})
    assert prepared.returncode != 0
    assert f"set {TEST_DATA_ENV}=" in prepared.stderr and "Traceback" not in prepared.stderr
