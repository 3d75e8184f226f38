"""Run untrusted, model-written code in a throwaway sandbox with limits and no network.

    result = await run_sandboxed("print(input())", stdin="hi", limits=SandboxLimits(wall_seconds=5))
    result.stdout, result.exit_code, result.timed_out, result.limit_hit, result.truncated

What a sandboxed program gets:
- its own network namespace (no interface but an unconfigured loopback: nothing on the host is reachable),
  pid, IPC and UTS namespaces; when the run ends or is killed, every process it started dies with it;
- a read-only view of the system (`/usr`, the libraries, the server's Python installation and virtualenv)
  and nothing else of the host: no home, no project checkout, no server config or secrets; a writable
  work dir `/sandbox` holding the input files (read-only) and a fresh `/tmp`, both size-limited and in
  memory, gone afterwards; the host-side staging dir (stdin, stdout, stderr, inputs) is removed too;
- a clean environment (PATH, HOME, locale; none of the server's variables);
- limits (`SandboxLimits`): wall time (the whole run is killed), CPU time per process (SIGXCPU), address
  space per process (Python raises MemoryError), file size (stdout included), processes; stdout and
  stderr are each cut at `output_bytes` (`truncated` says so); it runs at lower priority (nice 10) so
  the server stays responsive. As root the program runs as a uid of its own (60000 + slot): the kernel
  does not apply the process limit to root, so without that a fork bomb would not be contained.

Isolation (`SandboxLimits.isolation`):
- `auto` (default): bubblewrap if it works here, else the unshare fallback, else SandboxUnavailableError.
- `bwrap`: bubblewrap (`make sandbox-tools` installs it on Debian/Ubuntu when run as root).
- `unshare`: util-linux unshare(1) creates the namespaces and a small shell script, running before any
  model code, builds the same read-only root from bind mounts and tmpfs and pivots into it.
- `none`: no isolation at all, only the limits and (as root) the separate uid. The program can reach
  the network and read whatever the uid may read on the host. Never chosen automatically: this is the
  explicit opt-in for hosts without namespaces. That uid must be able to run the server's Python (not
  so when it lives under a private /root, as pyenv's does): otherwise `none` raises SandboxUnavailableError.

A server builds one `SandboxSlots` from its config at start: the isolation is checked then (it refuses to
start rather than run code unprotected), at most so many runs go at once, and each run takes the
configured limits with its own time budget; `SandboxResult.early_end()` says why a run stopped early.

Runs are awaited, never computed on the event loop: the program is a child process the loop waits for.
"""

from nemo_gym.sandbox.isolation import SandboxUnavailableError, python_command, resolve_isolation
from nemo_gym.sandbox.models import Isolation, LimitHit, SandboxLimits, SandboxResult
from nemo_gym.sandbox.runner import run_sandboxed
from nemo_gym.sandbox.slots import SandboxSlots

__all__ = [
    "Isolation",
    "LimitHit",
    "SandboxLimits",
    "SandboxResult",
    "SandboxSlots",
    "SandboxUnavailableError",
    "python_command",
    "resolve_isolation",
    "run_sandboxed",
]
