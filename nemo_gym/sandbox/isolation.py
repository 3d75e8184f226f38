"""The command line that wraps a sandboxed program: bubblewrap, unshare(1) with a mount script, or neither.

All three end in the same chain, run inside the sandbox right before the program: `prlimit` (limits),
`nice` (the server's own processes come first) and, when we are root, `setpriv` to drop to a sandbox uid
of our own. The uid matters: the kernel never enforces the process limit for root, so a fork bomb is only
contained once the program runs as an ordinary uid. Each concurrent run takes a different uid from
`UID_BASE.. + UID_SLOTS`, held by an abstract unix socket, so one run's fork bomb cannot use up another
run's process budget.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from nemo_gym.sandbox.models import Isolation, SandboxLimits

WORK_DIR = "/sandbox"
NICENESS = 10
UID_BASE = 60000
UID_SLOTS = 256
NON_ROOT_SANDBOX_UID = 65534
PROBE_TIMEOUT_S = 10.0
MIB = 1024 * 1024
ROOT_TMPFS = "size=8m,mode=0755"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_ENV = {
    "PATH": PATH,
    "HOME": WORK_DIR,
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    # numerical libraries otherwise start a thread per core, each counted against max_processes
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
# What a program may see of the host, read-only (plus the Python installation that runs the server).
SYSTEM_PATHS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
)
DEVICES = ("null", "zero", "full", "random", "urandom")
FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class SandboxUnavailableError(RuntimeError):
    """The requested isolation cannot work on this host."""


def is_root() -> bool:
    return os.geteuid() == 0


def python_command() -> list[str]:
    """The server's own interpreter in isolated mode (no PYTHON* variables, no user site, no script dir)."""
    return [sys.executable, "-I", "-B"]


def check_file_names(names: Sequence[str]) -> None:
    for name in names:
        if not FILE_NAME.fullmatch(name):
            raise ValueError(f"sandbox file name {name!r}: use letters, digits, '_', '.', '-' only")


@cache
def visible_paths() -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """(symlinks to recreate as (path, target), host paths to bind read-only at the same place)."""
    links, binds = [], []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            links.append((path, os.readlink(path)))
        elif os.path.exists(path):
            binds.append(path)
    for prefix in dict.fromkeys((sys.base_prefix, sys.prefix)):
        real = os.path.realpath(prefix)
        if not any(real == bound or real.startswith(bound + "/") for bound in binds):
            binds.append(os.path.abspath(prefix))
    return tuple(links), tuple(binds)


def parent_dirs(paths: Sequence[str]) -> list[str]:
    """Every ancestor directory of `paths` below `/`, parents first."""
    parents = {str(parent) for path in paths for parent in Path(path).parents if str(parent) != "/"}
    return sorted(parents, key=lambda parent: (parent.count("/"), parent))


@contextmanager
def uid_slot() -> Iterator[int | None]:
    """A uid no other run uses meanwhile (root only; None otherwise: a user namespace isolates instead)."""
    if not is_root():
        yield None
        return
    for uid in range(UID_BASE, UID_BASE + UID_SLOTS):
        lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            lock.bind(f"\0nemo-gym-sandbox-uid-{uid}")
        except OSError:
            lock.close()
            continue
        try:
            yield uid
        finally:
            lock.close()
        return
    raise SandboxUnavailableError(f"all {UID_SLOTS} sandbox uids are in use; too many runs at once")


def limit_chain(limits: SandboxLimits, uid: int | None, drop_caps: bool) -> list[str]:
    """prlimit + nice (+ setpriv), ending in `--`: the program's argv follows."""
    cpu = math.ceil(limits.cpu_seconds)
    chain = [
        "prlimit",
        f"--as={limits.memory_mb * MIB}",
        f"--cpu={cpu}:{cpu + 1}",
        f"--fsize={limits.file_size_mb * MIB}",
        f"--nproc={limits.max_processes}",
        "--core=0",
        "--",
        "nice",
        "-n",
        str(NICENESS),
    ]
    if uid is not None:
        chain += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    elif drop_caps:
        chain += ["setpriv"]
    if uid is not None or drop_caps:
        chain += ["--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
    return chain + ["--"]


def bwrap_argv(staging: Path, names: Sequence[str], limits: SandboxLimits, uid: int | None) -> list[str]:
    """As root, no user namespace (bwrap would map the sandbox to host root); otherwise bwrap's own."""
    argv = ["bwrap", "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid"]
    argv += ["--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if uid is None:
        uid_text = str(NON_ROOT_SANDBOX_UID)
        argv += ["--unshare-user", "--uid", uid_text, "--gid", uid_text, "--disable-userns"]
    # The fresh /tmp comes first: a Python installation or virtualenv under /tmp is then bound on top of it.
    for directory in ("/tmp", WORK_DIR):
        argv += ["--size", str(limits.scratch_mb * MIB), "--perms", "1777", "--tmpfs", directory]
    links, binds = visible_paths()
    for directory in parent_dirs([path for path, _ in links] + list(binds)):
        argv += ["--perms", "0755", "--dir", directory]  # as root, bwrap would make them private (0700)
    for path, target in links:
        argv += ["--symlink", target, path]
    for path in binds:
        argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    for name in names:
        argv += ["--ro-bind", str(staging / "files" / name), f"{WORK_DIR}/{name}"]
    argv += ["--remount-ro", "/", "--chdir", WORK_DIR, "--"]
    return argv + limit_chain(limits, uid, drop_caps=False)


def unshare_argv(staging: Path, names: Sequence[str], limits: SandboxLimits, uid: int | None) -> list[str]:
    """New namespaces by unshare(1); a shell script (run as root of the new namespaces, before any model
    code) builds a root from read-only binds and fresh tmpfs, pivots into it and detaches the host's."""
    scratch = f"size={limits.scratch_mb * MIB},mode=1777"
    lines = [
        "set -eu",
        "umask 022",
        f"r={shlex.quote(str(staging / 'root'))}",
        'ro() { if [ -d "$1" ]; then mkdir -p "$r$2"; else mkdir -p "$(dirname "$r$2")"; touch "$r$2"; fi; '
        'mount --bind -o ro "$1" "$r$2"; }',
        f'mount -t tmpfs -o {ROOT_TMPFS} gym-sandbox "$r"',
        # The fresh /tmp comes first: a Python installation or virtualenv under /tmp is bound on top of it.
        'mkdir "$r/tmp"',
        f'mount -t tmpfs -o {scratch} gym-sandbox-tmp "$r/tmp"',
    ]
    links, binds = visible_paths()
    lines += [
        f'mkdir -p "$(dirname "$r{path}")"; ln -s {shlex.quote(target)} "$r{path}"' for path, target in links
    ]
    lines += [f"ro {shlex.quote(path)} {shlex.quote(path)}" for path in binds]
    lines += [
        'mkdir "$r/proc" "$r/dev" "$r/sandbox"',
        'mount -t proc proc "$r/proc"',
        f'for d in {" ".join(DEVICES)}; do touch "$r/dev/$d"; mount --bind "/dev/$d" "$r/dev/$d"; done',
        'ln -s /proc/self/fd "$r/dev/fd"',
        f'mount -t tmpfs -o {scratch} gym-sandbox-work "$r{WORK_DIR}"',
    ]
    lines += [f"ro {shlex.quote(str(staging / 'files' / name))} {WORK_DIR}/{name}" for name in names]
    lines += [
        'cd "$r"; mkdir .old; pivot_root . .old; umount -l /.old; rmdir /.old; mount -o remount,bind,ro /',
        f"cd {WORK_DIR}",
        '"$@"',  # a child, not exec: pid 1 of a namespace ignores signals it has no handler for
    ]
    namespaces = ["--ipc", "--pid", "--net", "--uts", "--mount", "--fork", "--kill-child"]
    if uid is None:
        namespaces = ["--user", "--map-root-user", *namespaces]
    script = "\n".join(lines)
    return ["unshare", *namespaces, "--", "sh", "-c", script, "gym-sandbox"] + limit_chain(
        limits, uid, drop_caps=uid is None
    )


def unisolated_argv(limits: SandboxLimits, uid: int | None) -> list[str]:
    return limit_chain(limits, uid, drop_caps=False)


def wrapper_argv(
    isolation: Isolation, staging: Path, names: Sequence[str], limits: SandboxLimits, uid: int | None
) -> list[str]:
    if isolation == "bwrap":
        return bwrap_argv(staging, names, limits, uid)
    if isolation == "unshare":
        return unshare_argv(staging, names, limits, uid)
    return unisolated_argv(limits, uid)


def resolve_isolation(requested: Isolation) -> Isolation:
    """The isolation a run will use; raises SandboxUnavailableError rather than run code unprotected, or
    (`none`) rather than run programs that cannot start the server's Python."""
    if requested == "none":
        if (problem := probe("none")) is not None:
            raise SandboxUnavailableError(f"isolation none cannot run the server's Python here: {problem}")
        return "none"
    candidates: tuple[Isolation, ...] = ("bwrap", "unshare") if requested == "auto" else (requested,)
    problems = {}
    for candidate in candidates:
        problems[candidate] = probe(candidate)
        if problems[candidate] is None:
            return candidate
    details = "; ".join(f"{name}: {problem}" for name, problem in problems.items())
    raise SandboxUnavailableError(
        f"no sandbox isolation available ({details}). Install bubblewrap (`make sandbox-tools`) or allow "
        "namespaces; `isolation: none` runs model code unisolated (unsafe: network and host files reachable)"
    )


@cache
def probe(isolation: Isolation) -> str | None:
    """Why `isolation` cannot run a trivial program here (None: it can). Run once per process.

    Under `none` the trivial program is the server's own Python on the host's file system: as root it runs
    as a sandbox uid, which may not reach the installation (pyenv's under a private /root, say)."""
    unisolated = isolation == "none"
    tools = ["prlimit", "nice"] + ([] if unisolated else [isolation])
    tools += ["setpriv"] if is_root() or isolation == "unshare" else []
    if missing := [tool for tool in tools if shutil.which(tool, path=PATH) is None]:
        return f"missing {', '.join(missing)}"
    with tempfile.TemporaryDirectory(prefix="gym-sandbox-probe-") as staging, uid_slot() as uid:
        work = prepare_staging(Path(staging), {}, uid)
        program = [*python_command(), "-c", PYTHON_IDENTITY] if unisolated else ["true"]
        argv = wrapper_argv(isolation, Path(staging), [], SandboxLimits(), uid) + program
        try:
            done = subprocess.run(
                argv, env=SANDBOX_ENV, cwd=work if unisolated else None, capture_output=True,
                timeout=PROBE_TIMEOUT_S,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return f"a trivial program did not finish within {PROBE_TIMEOUT_S} s"
    if done.returncode != 0:
        problem = done.stderr.decode(errors="replace").strip()[-500:] or f"exit status {done.returncode}"
        return problem + (unreachable_python_hint(uid) if unisolated else "")
    if unisolated and (found := done.stdout.decode(errors="replace")) != python_identity():
        return (
            f"the program runs {describe_python(found)}, not the server's {describe_python(python_identity())}"
            + unreachable_python_hint(uid)
        )
    return None


PYTHON_IDENTITY = "import sys; print(sys.version.split()[0], sys.base_prefix, sys.prefix, sep=chr(10))"


def python_identity() -> str:
    """What PYTHON_IDENTITY prints when the server's own Python runs it."""
    return f"{sys.version.split()[0]}\n{sys.base_prefix}\n{sys.prefix}\n"


def describe_python(identity: str) -> str:
    version, base_prefix, prefix = (identity.splitlines() + ["?"] * 3)[:3]
    return f"Python {version} from {base_prefix}" + (f" (venv {prefix})" if prefix != base_prefix else "")


def unreachable_python_hint(uid: int | None) -> str:
    """Which directory keeps sandbox uid `uid` from the server's Python (installation or venv), and what to do."""
    if uid is None:
        return ""
    for prefix in dict.fromkeys((sys.base_prefix, sys.prefix)):
        for directory in [*reversed(Path(prefix).parents), Path(prefix)]:
            if not os.stat(directory).st_mode & stat.S_IXOTH:
                return (
                    f" ({directory} is closed to other users, so uid {uid} cannot reach {prefix}: install "
                    "Python where other users can read it, or use bwrap or unshare)"
                )
    return ""


def prepare_staging(staging: Path, files: Mapping[str, bytes], uid: int | None) -> Path:
    """The input files in `files/` (bound read-only into isolated runs; the writable work dir of
    unisolated ones, hence owned by the sandbox uid) and an empty `root/` (where unshare builds the new
    root). Answers the `files/` dir."""
    (staging / "root").mkdir()
    inputs = staging / "files"
    inputs.mkdir()
    for name, content in files.items():
        (inputs / name).write_bytes(content)
        (inputs / name).chmod(0o644)
    if uid is not None:
        staging.chmod(0o711)
        os.chown(inputs, uid, uid)
    return inputs
