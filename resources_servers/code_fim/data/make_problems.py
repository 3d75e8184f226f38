"""Writes data/problems.json, the bundled HumanEval-Infilling-style problems (made for this project).

Each source function below is cut into prefix (`prompt`), middle (`canonical_solution`) and `suffix` at
the marked lines or characters; `test` defines check(candidate). The task-id prefixes name the split as
HumanEval-Infilling does. Run: python resources_servers/code_fim/data/make_problems.py
"""

import json
from pathlib import Path

FUNCTIONS = {
    "clamp": (
        "def clamp(value, low, high):\n"
        '    """Limit value to the range [low, high]."""\n'
        "    if value < low:\n"
        "        return low\n"
        "    if value > high:\n"
        "        return high\n"
        "    return value\n",
        "def check(candidate):\n    assert candidate(5, 0, 10) == 5\n    assert candidate(-3, 0, 10) == 0\n"
        "    assert candidate(12, 0, 10) == 10\n    assert candidate(0, 0, 0) == 0\n",
    ),
    "word_lengths": (
        "def word_lengths(sentence):\n"
        '    """Map each distinct word of sentence to its length."""\n'
        "    lengths = {}\n"
        "    for word in sentence.split():\n"
        "        lengths[word] = len(word)\n"
        "    return lengths\n",
        "def check(candidate):\n    assert candidate('a bb ccc') == {'a': 1, 'bb': 2, 'ccc': 3}\n"
        "    assert candidate('') == {}\n    assert candidate('hi hi') == {'hi': 2}\n",
    ),
    "fizz": (
        "def fizz(n):\n"
        '    """The FizzBuzz word for n."""\n'
        "    if n % 15 == 0:\n"
        "        return 'FizzBuzz'\n"
        "    if n % 3 == 0:\n"
        "        return 'Fizz'\n"
        "    if n % 5 == 0:\n"
        "        return 'Buzz'\n"
        "    return str(n)\n",
        "def check(candidate):\n    assert candidate(9) == 'Fizz'\n    assert candidate(10) == 'Buzz'\n"
        "    assert candidate(30) == 'FizzBuzz'\n    assert candidate(7) == '7'\n",
    ),
    "flatten": (
        "def flatten(nested):\n"
        '    """All the items of a list of lists, in order."""\n'
        "    flat = []\n"
        "    for inner in nested:\n"
        "        flat.extend(inner)\n"
        "    return flat\n",
        "def check(candidate):\n    assert candidate([[1, 2], [], [3]]) == [1, 2, 3]\n    assert candidate([]) == []\n",
    ),
    "gcd": (
        "def gcd(a, b):\n"
        '    """Greatest common divisor of two non-negative integers."""\n'
        "    while b:\n"
        "        a, b = b, a % b\n"
        "    return a\n",
        "def check(candidate):\n    assert candidate(12, 18) == 6\n    assert candidate(7, 0) == 7\n"
        "    assert candidate(17, 5) == 1\n",
    ),
}

# (task id, function, cut): a cut of lines (first, last) keeps those source lines as the middle; a cut
# of ("chars", start, end) keeps that character span.
CUTS = [
    ("RandomSpanInfilling/gym/0/0", "clamp", ("chars", 80, 131)),
    ("RandomSpanInfilling/gym/1/0", "word_lengths", ("chars", 110, 150)),
    ("RandomSpanInfilling/gym/2/0", "fizz", ("chars", 60, 120)),
    ("RandomSpanInfilling/gym/3/0", "flatten", ("chars", 86, 131)),
    ("RandomSpanInfilling/gym/4/0", "gcd", ("chars", 92, 112)),
    ("SingleLineInfilling/gym/4/L3", "gcd", (3, 3)),
    ("MultiLineInfilling/gym/2/L2-L3", "fizz", (2, 3)),
]


def cut(source: str, spec: tuple) -> tuple[str, str, str]:
    if spec[0] == "chars":
        _, start, end = spec
    else:
        lines = source.splitlines(keepends=True)
        start = sum(len(line) for line in lines[: spec[0]])
        end = sum(len(line) for line in lines[: spec[1] + 1])
    return source[:start], source[start:end], source[end:]


def main() -> None:
    problems = []
    for task_id, name, spec in CUTS:
        source, test = FUNCTIONS[name]
        prefix, middle, suffix = cut(source, spec)
        problems.append(
            {
                "task_id": task_id,
                "entry_point": name,
                "prompt": prefix,
                "suffix": suffix,
                "canonical_solution": middle,
                "test": test,
            }
        )
    target = Path(__file__).with_name("problems.json")
    target.write_text(json.dumps(problems, indent=1) + "\n")


if __name__ == "__main__":
    main()
