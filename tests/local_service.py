"""Start a local stand-in for an external service (Hugging Face Hub, GitLab) the way tests expect it.

The service binds 127.0.0.1 on an OS-chosen port, listens before it tells anyone, then writes
{"host", "port", "pid"} atomically to the file named by NEMO_GYM_BOUND_ADDRESS_FILE (or prints it), which
is what `tests.helpers.run_server` waits for.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import orjson
from aiohttp import web


def serve(app: web.Application, host: str = "127.0.0.1", port: int = 0) -> None:
    """Serve `app` on `host`:`port` (port 0: one the OS chooses)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    sock = socket.socket()
    sock.bind((host, port))
    sock.listen(1024)
    host, port = sock.getsockname()
    address = orjson.dumps({"host": host, "port": port, "pid": os.getpid()})
    if "NEMO_GYM_BOUND_ADDRESS_FILE" in os.environ:
        target = Path(os.environ["NEMO_GYM_BOUND_ADDRESS_FILE"])
        staging = Path(f"{target}.tmp")
        staging.write_bytes(address)
        staging.replace(target)
    else:
        print(address.decode(), flush=True)
    web.run_app(app, sock=sock, print=None, shutdown_timeout=1, handler_cancellation=True)
