"""Writes data/problems.json, the bundled HumanEval+/MBPP+-style problems (made for this project).

Each problem has a prompt (signature and docstring), a reference solution, base inputs (the original
benchmark's kind of tests) and plus inputs (the harder EvalPlus kind: edge cases the base tests miss).
The expected outputs are computed here by running the reference solutions (trusted code), so the server
never runs a reference at start. Run: python resources_servers/evalplus/data/make_problems.py
"""

import json
from pathlib import Path

PROBLEMS = [
    {
        "task_id": "HumanEval/gym-0",
        "entry_point": "running_max",
        "prompt": 'def running_max(numbers: list[int]) -> list[int]:\n    """Return the list whose i-th item is the largest of numbers[0..i].\n    >>> running_max([1, 3, 2, 5])\n    [1, 3, 3, 5]\n    """\n',
        "canonical_solution": "def running_max(numbers):\n    result = []\n    for number in numbers:\n        result.append(number if not result else max(result[-1], number))\n    return result\n",
        "base_input": [[[1, 3, 2, 5]], [[4, 4, 1]], [[7]]],
        "plus_input": [[[]], [[-5, -9, -2]], [[-1, -1, -3, 0]]],
    },
    {
        "task_id": "HumanEval/gym-1",
        "entry_point": "count_vowels",
        "prompt": 'def count_vowels(text: str) -> int:\n    """Count the vowels (a, e, i, o, u, in either case) in text.\n    >>> count_vowels("banana")\n    3\n    """\n',
        "canonical_solution": "def count_vowels(text):\n    return sum(1 for char in text.lower() if char in 'aeiou')\n",
        "base_input": [["banana"], ["sky"], ["education"]],
        "plus_input": [["AEIOU"], [""], ["Queue Of Umbrellas"]],
    },
    {
        "task_id": "HumanEval/gym-2",
        "entry_point": "digit_sum",
        "prompt": 'def digit_sum(n: int) -> int:\n    """Sum of the decimal digits of n; the sign is ignored.\n    >>> digit_sum(123)\n    6\n    """\n',
        "canonical_solution": "def digit_sum(n):\n    return sum(int(digit) for digit in str(abs(n)))\n",
        "base_input": [[123], [9], [4005]],
        "plus_input": [[-38], [0], [10**18 + 7]],
    },
    {
        "task_id": "HumanEval/gym-3",
        "entry_point": "median",
        "prompt": 'def median(values: list[float]) -> float:\n    """The median of a non-empty list (the mean of the two middle items for an even length).\n    >>> median([3, 1, 2])\n    2\n    """\n',
        "canonical_solution": "def median(values):\n    ordered = sorted(values)\n    middle = len(ordered) // 2\n    if len(ordered) % 2:\n        return ordered[middle]\n    return (ordered[middle - 1] + ordered[middle]) / 2\n",
        "base_input": [[[3, 1, 2]], [[5]], [[9, 1, 4, 7, 2]]],
        "plus_input": [[[1, 2, 3, 4]], [[-1.5, 2.5]], [[10, 0, 0, 10, 5, 5]]],
    },
    {
        "task_id": "HumanEval/gym-4",
        "entry_point": "compress_runs",
        "prompt": 'def compress_runs(text: str) -> str:\n    """Run-length encode text: each run of one character becomes the character and its count.\n    >>> compress_runs("aaabcc")\n    \'a3b1c2\'\n    """\n',
        "canonical_solution": "def compress_runs(text):\n    parts = []\n    for char in text:\n        if parts and parts[-1][0] == char:\n            parts[-1][1] += 1\n        else:\n            parts.append([char, 1])\n    return ''.join(f'{char}{count}' for char, count in parts)\n",
        "base_input": [["aaabcc"], ["x"], ["aabb"]],
        "plus_input": [[""], ["zzzzzzzzzzzz"], ["abab"]],
    },
    {
        "task_id": "Mbpp/gym-0",
        "entry_point": "second_largest",
        "prompt": '"""Write a function to find the second largest distinct number in a list (None if there is none).\nassert second_largest([4, 1, 3]) == 3\n"""\n',
        "canonical_solution": "def second_largest(numbers):\n    distinct = sorted(set(numbers))\n    return distinct[-2] if len(distinct) > 1 else None\n",
        "base_input": [[[4, 1, 3]], [[10, 20]], [[5, 9, 9, 2]]],
        "plus_input": [[[7, 7]], [[-3, -8, -3]], [[1]]],
    },
    {
        "task_id": "Mbpp/gym-1",
        "entry_point": "unique_in_order",
        "prompt": '"""Write a function that removes repeated items from a list, keeping the first occurrence of each.\nassert unique_in_order([3, 1, 3, 2, 1]) == [3, 1, 2]\n"""\n',
        "canonical_solution": "def unique_in_order(items):\n    seen = set()\n    return [item for item in items if not (item in seen or seen.add(item))]\n",
        "base_input": [[[3, 1, 3, 2, 1]], [[1, 2, 3]]],
        "plus_input": [[[]], [["b", "a", "b"]]],
    },
]


def main() -> None:
    for problem in PROBLEMS:
        namespace: dict = {}
        exec(problem["canonical_solution"], namespace)  # noqa: S102 - our own reference solutions
        function = namespace[problem["entry_point"]]
        for group in ("base", "plus"):
            problem[f"{group}_expected"] = [function(*args) for args in problem[f"{group}_input"]]
        problem["atol"] = 1e-6
    target = Path(__file__).with_name("problems.json")
    target.write_text(json.dumps(PROBLEMS, indent=1) + "\n")


if __name__ == "__main__":
    main()
