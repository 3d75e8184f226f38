"""Runs INSIDE the sandbox: one SciCode sub-step's tests against the model's code.

Reads a token line, then the step as JSON (`code`, `tests`) from stdin. The step's targets are in
`targets.h5` of the work dir (the server copied just this step's groups there). Order: the targets are
loaded (a failure there is the harness's, not the model's), the model's code runs in a fresh module
namespace that also holds SciCode's comparison helpers (`cmp_tuple_or_list`, `are_dicts_close`,
`are_csc_matrix_close`, which the tests call), then each test runs in that namespace with `target`
bound to its target. It writes JSON lines carrying the token to a private copy of stdout:
{"status": "started"} before any model code, then {"status": "pass" | "fail" | "error", "details"}.
"""

import json
import os
import sys
import types

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_name] = "1"  # before NumPy loads: one native thread per sandboxed process

MESSAGE_CHARS = 500
TARGETS_FILE = "targets.h5"


# --- targets: SciCode's test_data.h5 layout -------------------------------------------------------


def _sparse(group):
    import scipy.sparse

    data, shape = group["data"][()], tuple(group["shape"][()])
    if "row" in group and "col" in group:
        return scipy.sparse.coo_matrix((data, (group["row"][()], group["col"][()])), shape=shape)
    index = (data, group["indices"][()], group["indptr"][()])
    if "blocksize" in group:
        return scipy.sparse.bsr_matrix(index, shape=shape, blocksize=tuple(group["blocksize"][()]))
    return scipy.sparse.csr_matrix(index, shape=shape)


def _scalar(dataset):
    value = dataset[()]
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _mapping(group):
    import h5py

    result = {}
    for key, node in group.items():
        if isinstance(node, h5py.Group):
            value = _sparse(node["sparse_matrix"])
        else:
            value = _scalar(node)
        try:
            result[float(key)] = value
        except ValueError:
            result[key] = value
    return result


def _node(node):
    """One variable: a dataset's value, or a group holding a list, a sparse matrix or a dict."""
    import h5py

    if isinstance(node, h5py.Dataset):
        return _scalar(node)
    keys = list(node.keys())
    if keys and keys[0] == "list":
        return [node["list"][key][()] for key in node["list"].keys()]
    if keys and keys[0] == "sparse_matrix":
        return _sparse(node["sparse_matrix"])
    return _mapping(node)


def load_targets(step_number, count):
    """The target of each test: its single variable, or a tuple of its variables."""
    import h5py

    targets = []
    with h5py.File(TARGETS_FILE, "r") as data:
        for number in range(1, count + 1):
            group = data[f"{step_number}/test{number}"]
            values = [_node(group[key]) for key in group.keys()]
            targets.append(values[0] if len(values) == 1 else tuple(values))
    return targets


# --- the comparison helpers SciCode's tests call --------------------------------------------------


def are_csc_matrix_close(first, second):
    import numpy as np

    return np.allclose(first.toarray(), second.toarray())


def are_dicts_close(first, second, atol=1e-8, rtol=1e-5):
    import numpy as np
    import scipy.sparse
    import sympy

    def plain(mapping):
        return {
            (str(k) if isinstance(k, sympy.Symbol) else k): (str(v) if isinstance(v, sympy.Symbol) else v)
            for k, v in mapping.items()
        }

    first, second = plain(first), plain(second)
    if first.keys() != second.keys():
        return False
    for key, left in first.items():
        right = second[key]
        if isinstance(left, str):
            if left != right:
                return False
            continue
        if scipy.sparse.issparse(left):
            left, right = left.toarray(), right.toarray()
        try:
            if not np.allclose(left, right, atol=atol, rtol=rtol):
                return False
        except (ValueError, TypeError):
            if left != right:
                return False
    return True


def cmp_tuple_or_list(first, second):
    import numpy as np
    import scipy.sparse

    if len(first) != len(second):
        return False
    for left, right in zip(first, second, strict=True):
        if isinstance(left, dict):
            same = are_dicts_close(left, right)
        elif scipy.sparse.issparse(left):
            same = are_csc_matrix_close(left, right)
        elif isinstance(left, bool):
            same = left == right
        else:
            try:
                same = bool(np.allclose(left, right))
            except (ValueError, TypeError):
                same = left == right
        if not same:
            return False
    return True


HELPERS = {
    "cmp_tuple_or_list": cmp_tuple_or_list,
    "are_dicts_close": are_dicts_close,
    "are_csc_matrix_close": are_csc_matrix_close,
}


# --- the run --------------------------------------------------------------------------------------


def _error(reason, error, phase, **extra):
    details = {
        "reason": reason,
        "phase": phase,
        "type": type(error).__name__,
        "message": str(error)[:MESSAGE_CHARS],
    }
    details.update(extra)
    if phase != "model":
        details["harness_fault"] = True
    return {"status": "error", "details": details}


def run_step(step, report):
    try:
        targets = load_targets(step["step_number"], len(step["tests"]))
        import numpy  # noqa: F401  (loaded before the model's code can break the import machinery)
    except BaseException as error:
        return _error("targets_unreadable", error, "targets")
    module = types.ModuleType("__scicode__")
    sys.modules["__scicode__"] = module
    namespace = module.__dict__
    namespace.update(HELPERS)
    report({"status": "started"})
    try:
        exec(compile(step["code"], "<scicode_solution>", "exec"), namespace)
    except SyntaxError as error:
        return _error("syntax_error", error, "model")
    except BaseException as error:
        return _error("exec_failed", error, "model")
    for index, (test, target) in enumerate(zip(step["tests"], targets, strict=True)):
        namespace["target"] = target
        try:
            exec(compile(test, f"<scicode_test_{index + 1}>", "exec"), namespace)
        except AssertionError as error:
            details = {"test": index + 1, "type": "AssertionError", "message": str(error)[:MESSAGE_CHARS]}
            return {"status": "fail", "details": details}
        except BaseException as error:  # the test calls the model's functions: their errors are the model's
            return _error("test_raised", error, "model", test=index + 1)
    return {"status": "pass", "details": {}}


def main():
    token = sys.stdin.readline().strip()
    step = json.loads(sys.stdin.read())
    channel = os.dup(1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w", encoding="utf-8")

    def report(line):
        os.write(channel, (json.dumps({**line, "token": token}) + "\n").encode())

    report(run_step(step, report))
    os._exit(0)


if __name__ == "__main__":
    main()
