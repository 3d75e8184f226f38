"""The 5 example problems of this folder: their rows (data/example.jsonl) and their numeric targets (the
layout of SciCode's test_data.h5: group `<step_number>/test<i>`, one dataset `var1` per returned value).

The targets are computed here with NumPy from reference implementations, so `write_test_data` is
deterministic; the server writes them to a temp file at start when `test_data_fpath` is null.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np

DEPENDENCIES = "import numpy as np"


def _trapezoid(y, dx):
    y = np.asarray(y, dtype=float)
    return float(dx * (y.sum() - 0.5 * (y[0] + y[-1])))


def _rotation(theta):
    c, s = np.cos(theta), np.sin(theta)
    return np.array([[c, -s], [s, c]])


def _moments(x):
    x = np.asarray(x, dtype=float)
    return float(x.mean()), float(x.std())


def _decay(n0, lam, t):
    return n0 * np.exp(-lam * np.asarray(t, dtype=float))


def _projectile_range(v, angle_deg, g=9.81):
    return v**2 * np.sin(2 * np.radians(angle_deg)) / g


# (problem_id, problem_name, steps); a step is (function header, description, [(test source, target)]).
PROBLEMS: list[tuple[str, str, list[tuple[str, str, list[tuple[str, Any]]]]]] = [
    (
        "1",
        "trapezoid_average",
        [
            (
                "def trapezoid(y, dx):\n    '''y: 1d array of samples on an even grid; dx: spacing. Returns float.'''",
                "Integrate evenly spaced samples y with the composite trapezoidal rule.",
                [
                    (
                        "y = np.linspace(0, 1, 11) ** 2\nassert np.allclose(trapezoid(y, 0.1), target)",
                        _trapezoid(np.linspace(0, 1, 11) ** 2, 0.1),
                    ),
                    (
                        "y = np.sin(np.linspace(0, np.pi, 21))\nassert np.allclose(trapezoid(y, np.pi / 20), target)",
                        _trapezoid(np.sin(np.linspace(0, np.pi, 21)), np.pi / 20),
                    ),
                ],
            ),
            (
                "def mean_value(y, a, b):\n    '''Average of samples y on an even grid over [a, b], via trapezoid. Returns float.'''",
                "Using trapezoid, return the mean value of the sampled function over [a, b].",
                [
                    (
                        "y = np.linspace(0, 2, 9) ** 3\nassert np.allclose(mean_value(y, 0.0, 2.0), target)",
                        _trapezoid(np.linspace(0, 2, 9) ** 3, 0.25) / 2.0,
                    ),
                ],
            ),
        ],
    ),
    (
        "2",
        "plane_rotation",
        [
            (
                "def rotation_matrix(theta):\n    '''2x2 matrix rotating vectors counter-clockwise by theta radians.'''",
                "Return the 2x2 counter-clockwise rotation matrix for angle theta.",
                [
                    ("assert np.allclose(rotation_matrix(np.pi / 6), target)", _rotation(np.pi / 6)),
                    ("assert np.allclose(rotation_matrix(-1.0), target)", _rotation(-1.0)),
                ],
            ),
            (
                "def rotate_points(points, theta):\n    '''points: (N, 2) array. Returns the (N, 2) array rotated by theta.'''",
                "Rotate every row of points by theta using rotation_matrix.",
                [
                    (
                        "p = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])\nassert np.allclose(rotate_points(p, np.pi / 2), target)",
                        np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]) @ _rotation(np.pi / 2).T,
                    ),
                ],
            ),
        ],
    ),
    (
        "3",
        "sample_moments",
        [
            (
                "def moments(x):\n    '''Returns (mean, population standard deviation) of the 1d array x.'''",
                "Return the mean and the population standard deviation of x as a tuple.",
                [
                    (
                        "from scicode.compare.cmp import cmp_tuple_or_list\nassert cmp_tuple_or_list(moments(np.array([1.0, 2.0, 4.0, 7.0])), target)",
                        _moments([1.0, 2.0, 4.0, 7.0]),
                    ),
                    (
                        "from scicode.compare.cmp import cmp_tuple_or_list\nassert cmp_tuple_or_list(moments(np.arange(10.0)), target)",
                        _moments(np.arange(10.0)),
                    ),
                ],
            ),
        ],
    ),
    (
        "4",
        "radioactive_decay",
        [
            (
                "def remaining(n0, lam, t):\n    '''Nuclei left at times t (array) from n0 with decay constant lam.'''",
                "Return the number of undecayed nuclei N(t) = n0 exp(-lam t) at each time in t.",
                [
                    (
                        "assert np.allclose(remaining(1000.0, 0.3, np.array([0.0, 1.0, 5.0])), target)",
                        _decay(1000.0, 0.3, [0.0, 1.0, 5.0]),
                    ),
                ],
            ),
            (
                "def half_life(lam):\n    '''Half-life for the decay constant lam.'''",
                "Return the half-life ln(2) / lam.",
                [
                    ("assert np.allclose(half_life(0.3), target)", np.log(2) / 0.3),
                    ("assert np.allclose(remaining(1.0, 0.7, half_life(0.7)), target)", 0.5),
                ],
            ),
        ],
    ),
    (
        "5",
        "projectile_range",
        [
            (
                "def projectile_range(v, angle_deg, g=9.81):\n    '''Range on flat ground of a launch at speed v and angle_deg degrees.'''",
                "Return the horizontal range v^2 sin(2 angle) / g of a projectile on flat ground.",
                [
                    (
                        "assert np.allclose(projectile_range(20.0, 45.0), target)",
                        _projectile_range(20.0, 45.0),
                    ),
                    (
                        "assert np.allclose(projectile_range(10.0, 30.0, g=1.62), target)",
                        _projectile_range(10.0, 30.0, g=1.62),
                    ),
                ],
            ),
        ],
    ),
]


def write_test_data(path: Path) -> None:
    """Write the targets of every example sub-step to an HDF5 file at `path`."""
    with h5py.File(path, "w") as out:
        for problem_id, _, steps in PROBLEMS:
            for index, (_, _, tests) in enumerate(steps, start=1):
                for number, (_, target) in enumerate(tests, start=1):
                    group = out.create_group(f"{problem_id}.{index}/test{number}")
                    values = target if isinstance(target, tuple) else (target,)
                    for position, value in enumerate(values, start=1):
                        group.create_dataset(f"var{position}", data=value)


def prompt(problem_name: str, steps: list[tuple[str, str, Any]]) -> str:
    parts = [
        f"Write Python code for the scientific problem `{problem_name}`. It has {len(steps)} step(s); later "
        "steps may call the functions of earlier ones. You may use these dependencies (already imported, "
        f"do not import anything else):\n\n{DEPENDENCIES}\n",
    ]
    for index, (header, description, _) in enumerate(steps, start=1):
        parts.append(f"Step {index}: {description}\n\n{header}\n")
    parts.append("Answer with all the functions together in one ```python code block.")
    return "\n".join(parts)


def rows() -> list[dict[str, Any]]:
    """The rows of data/example.jsonl (NeMo Gym's fields; the prompt asks for every step in one answer)."""
    result = []
    for problem_id, name, steps in PROBLEMS:
        sub_steps = [
            {
                "step_number": f"{problem_id}.{index}",
                "step_description_prompt": description,
                "function_header": header,
                "test_cases": [source for source, _ in tests],
                "return_line": "",
            }
            for index, (header, description, tests) in enumerate(steps, start=1)
        ]
        result.append(
            {
                "responses_create_params": {"input": [{"role": "user", "content": prompt(name, steps)}]},
                "problem_id": problem_id,
                "problem_name": name,
                "sub_steps": sub_steps,
                "required_dependencies": DEPENDENCIES,
                "uuid": f"example-{problem_id}",
                "agent_ref": {"type": "responses_api_agents", "name": "scicode_simple_agent"},
            }
        )
    return result


if __name__ == "__main__":  # regenerate data/example.jsonl (the targets are made at server start)
    import json

    target = Path(__file__).parent / "data" / "example.jsonl"
    target.write_text("".join(json.dumps(row) + "\n" for row in rows()))
