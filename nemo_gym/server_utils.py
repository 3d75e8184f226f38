"""Server plumbing: addressing peers by instance name, the server base classes, and the head server.

A server process is started with the path of the merged config file and its own instance name; it
validates its inner config with the class's declared config model, binds its socket itself, and serves a
FastAPI app with liveness, signed sessions and the one error format of `nemo_gym.errors`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import resource
import signal
import socket
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import orjson
import uvicorn
import yaml
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from nemo_gym.config_types import BaseRunServerInstanceConfig, BaseServerConfig, ConfigError
from nemo_gym.cpu_pool import shutdown_pool
from nemo_gym.deadlines import CallerDeadlineMiddleware
from nemo_gym.errors import ErrorEnvelopeMiddleware
from nemo_gym.global_config import (
    DEFAULT_HEAD_SERVER_PORT,
    DEFAULT_HOST,
    NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME,
    get_first_server_config_dict,
    get_global_config_dict,
    http_client_settings,
    mask_secrets,
    resolve_instance_config,
    to_yaml,
)
from nemo_gym.http_client import (
    MAX_NUM_TRIES,
    RetryPolicy,
    close_global_aiohttp_client,
    configure_http_client,
    get_response_json,
    raise_for_status,
    request,
)
from nemo_gym.http_protocol import RequestLimits, StartGate, gym_protocol
from nemo_gym.in_process import LocalResponse, call_in_process, is_hosted_here
from nemo_gym.parent_death import die_with_parent
from nemo_gym.request_bodies import OrjsonBodyRoute, validation_error_response
from nemo_gym.sessions import deployment_session_secret, install_session_middleware, session_cookie_name

__all__ = [
    "MAX_NUM_TRIES",
    "BaseServer",
    "HeadServer",
    "ServerClient",
    "SimpleServer",
    "get_response_json",
    "raise_for_status",
    "request",
]

logger = logging.getLogger("nemo_gym.server")

BOUND_ADDRESS_FILE_ENV_VAR_NAME = "NEMO_GYM_BOUND_ADDRESS_FILE"
LISTEN_FD_ENV_VAR_NAME = "NEMO_GYM_LISTEN_FD"
LAUNCHER_PID_ENV_VAR_NAME = "NEMO_GYM_LAUNCHER_PID"
# Set by `gym validate`: build the server from its config (validating it and the files setup loads), then
# exit 0 without binding or serving.
CHECK_CONFIG_ONLY_ENV_VAR_NAME = "NEMO_GYM_CHECK_CONFIG_ONLY"
SERVER_KEEPALIVE_S = 30
HEAD_CONFIG_FETCH_TIMEOUT_S = 10.0
TARGET_NOFILE_LIMIT = 65535
# Collections of the young generation every 10,000 allocations instead of 700, full ones 50x rarer: a
# server under load allocates millions of short-lived objects a second.
GC_THRESHOLDS = (10_000, 10, 50)


def head_server_config_from(global_config_dict: DictConfig) -> BaseServerConfig:
    head = global_config_dict.get("head_server") or {}
    port = head.get("port")
    return BaseServerConfig(
        host=head.get("host") or DEFAULT_HOST, port=DEFAULT_HEAD_SERVER_PORT if port is None else port
    )


def configure_http_client_from(global_config_dict: DictConfig, num_workers: int | None = None) -> None:
    """Apply the `global_aiohttp_*` / `global_http_*` knobs to this process; the pool limits are shared
    by the server's `num_workers` worker processes."""
    settings = http_client_settings(global_config_dict)
    workers = num_workers or 1
    configure_http_client(
        connector_limit=max(1, settings.global_aiohttp_connector_limit // workers),
        connector_limit_per_host=max(1, settings.global_aiohttp_connector_limit_per_host // workers),
        default_policy=RetryPolicy(
            max_attempts=settings.global_http_max_attempts,
            deadline_s=settings.global_http_deadline_s,
            connect_timeout_s=settings.global_http_connect_timeout_s,
        ),
    )


class ServerClient(BaseModel):
    """Calls other servers of the deployment by instance name (never by hard-coded address)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    head_server_config: BaseServerConfig
    global_config_dict: DictConfig
    # A running deployment's addresses never change; looking them up in the OmegaConf tree on every call
    # cost a tenth of an agent's CPU.
    _base_urls: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def load_from_global_config(cls, head_server_config: BaseServerConfig | None = None) -> ServerClient:
        """Fetch the running deployment's config from its head server (secrets arrive masked)."""
        head = head_server_config or head_server_config_from(get_global_config_dict())
        url = f"http://{head.host}:{head.port}/global_config_dict_yaml"
        try:
            with urllib.request.urlopen(url, timeout=HEAD_CONFIG_FETCH_TIMEOUT_S) as response:
                config_yaml = json.loads(response.read())
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            raise ValueError(
                f"Could not connect to the head server at {head.host}:{head.port} ({error}). "
                "Is `gym run` running, and does head_server.host/port match it?"
            ) from error
        return cls(head_server_config=head, global_config_dict=OmegaConf.create(yaml.safe_load(config_yaml)))

    def server_base_url(self, server_name: str) -> str:
        """Raises `ServerRefNotFoundError` (naming the known instances) for an unknown name."""
        url = self._base_urls.get(server_name)
        if url is None:
            inner = get_first_server_config_dict(self.global_config_dict, server_name)
            url = self._base_urls[server_name] = f"http://{inner['host']}:{inner['port']}"
        return url

    async def request(
        self, server_name: str, url_path: str, method: str, **kwargs: Any
    ) -> aiohttp.ClientResponse | LocalResponse:
        """Call another server of the deployment; in-process if it is co-hosted with this one."""
        payload = kwargs.get("json")
        if isinstance(payload, BaseModel):
            kwargs["json"] = payload.model_dump(mode="json", exclude_unset=True)
        if is_hosted_here(server_name):
            return await call_in_process(server_name, method, url_path, **kwargs)
        return await request(method, self.server_base_url(server_name) + url_path, _internal=True, **kwargs)

    async def get(
        self, server_name: str, url_path: str, **kwargs: Any
    ) -> aiohttp.ClientResponse | LocalResponse:
        return await self.request(server_name, url_path, "GET", **kwargs)

    async def post(
        self, server_name: str, url_path: str, **kwargs: Any
    ) -> aiohttp.ClientResponse | LocalResponse:
        return await self.request(server_name, url_path, "POST", **kwargs)


class BaseServer(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: BaseRunServerInstanceConfig


def bind_listening_socket(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """Bind and listen before serving, so the bound port is known and no other process can take it
    (`reuse_port`: except other sockets of this user that ask for SO_REUSEPORT too, as workers do)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(4096)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _listening_socket(instance_name: str, config: BaseServerConfig) -> socket.socket:
    """The socket the launcher reserved for this server (NEMO_GYM_LISTEN_FD), else a newly bound one."""
    inherited_fd = os.environ.pop(LISTEN_FD_ENV_VAR_NAME, None)
    if inherited_fd:
        return socket.socket(fileno=int(inherited_fd))
    try:
        return bind_listening_socket(config.host, config.port)
    except OSError as error:
        sys.exit(
            f"Error: server instance '{instance_name}' cannot listen on {config.host}:{config.port} "
            f"({error.strerror or error}). Choose another port, or leave it unset to get a free one."
        )


def _exit_with_the_launcher() -> None:
    """Ask Linux to stop this server when the launcher dies, even by SIGKILL, so no child is orphaned."""
    launcher_pid = os.environ.get(LAUNCHER_PID_ENV_VAR_NAME)
    if not launcher_pid or not sys.platform.startswith("linux"):
        return
    die_with_parent(signal.SIGTERM)
    if os.getppid() != int(launcher_pid):
        sys.exit("Error: the launcher exited before this server started.")


def _report_bound_address(sock: socket.socket) -> None:
    """Write `{"host", "port"}` atomically to the file the launcher named, if it named one."""
    target = os.environ.get(BOUND_ADDRESS_FILE_ENV_VAR_NAME)
    if not target:
        return
    host, port = sock.getsockname()[:2]
    temporary = Path(f"{target}.tmp")
    temporary.write_bytes(orjson.dumps({"host": host, "port": port, "pid": os.getpid()}))
    temporary.replace(target)


def _raise_open_file_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = TARGET_NOFILE_LIMIT if hard == resource.RLIM_INFINITY else min(TARGET_NOFILE_LIMIT, hard)
    if soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError) as error:
            logger.warning("could not raise the open-file limit from %d to %d: %s", soft, wanted, error)


def new_app() -> FastAPI:
    """The FastAPI app every Gym server starts from (routes added to it parse bodies with orjson)."""
    app = FastAPI(exception_handlers={RequestValidationError: validation_error_response})
    app.router.route_class = OrjsonBodyRoute
    return app


def finalize_app(app: FastAPI, server_label: str) -> FastAPI:
    """Add what every Gym server has: `GET /` liveness, the caller's deadline taken up, and the error
    format (innermost middleware, so error responses still carry the session cookie)."""
    if not any(getattr(route, "path", None) == "/" for route in app.router.routes):
        app.add_api_route("/", _liveness, methods=["GET"])
    app.router.on_shutdown.append(close_global_aiohttp_client)
    app.router.on_shutdown.append(shutdown_pool)
    app.user_middleware.append(Middleware(CallerDeadlineMiddleware))
    app.user_middleware.append(Middleware(ErrorEnvelopeMiddleware, server_label=server_label))
    return app


async def _liveness() -> dict[str, str]:
    return {"status": "ok"}


def answers_liveness(app: FastAPI) -> bool:
    """Whether the app's `GET /` is `_liveness` (the protocol may then answer it without the app)."""
    return any(
        getattr(route, "path", None) == "/" and route.endpoint is _liveness for route in app.router.routes
    )


@dataclass
class BoundApp:
    """A server instance ready to serve: its app and the socket it listens on."""

    instance_name: str
    app: FastAPI
    sock: socket.socket

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return host, port


# Set by `nemo_gym.colocation` while it loads the servers it hosts: `run_webserver()` then hands its
# server over instead of serving it.
_colocation_collector: list[BoundApp] | None = None


class PortDispatcher:
    """One ASGI app in front of several: each request goes to the app listening on its local port."""

    def __init__(self, bound_apps: list[BoundApp]) -> None:
        self.apps = {bound.address[1]: bound.app for bound in bound_apps}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        await self.apps[scope["server"][1]](scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        async with contextlib.AsyncExitStack() as stack:
            try:
                for app in self.apps.values():
                    await stack.enter_async_context(app.router.lifespan_context(app))
            except Exception as error:
                await send({"type": "lifespan.startup.failed", "message": f"{type(error).__name__}: {error}"})
                return
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})


def serve(bound_apps: list[BoundApp], limits: RequestLimits, num_workers: int = 1) -> None:
    """Serve the apps on their sockets with uvloop and httptools (blocks).

    With `num_workers` > 1 the process forks that many copies in all, each serving every port on a socket
    of its own (see `_sockets_per_worker`); a copy that dies takes the others down with it, so the
    launcher sees the failure instead of a server quietly running at reduced strength.
    """
    app: ASGIApp = StartGate(bound_apps[0].app if len(bound_apps) == 1 else PortDispatcher(bound_apps))
    sockets = [bound.sock for bound in bound_apps]
    _tune_gc_for_serving()
    if num_workers > 1:
        per_worker = _sockets_per_worker(sockets, num_workers)
        sockets = per_worker[_fork_workers(num_workers - 1)]
        for other in per_worker:
            if other is not sockets:
                for sock in other:
                    sock.close()
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http=gym_protocol(
            limits,
            "+".join(bound.instance_name for bound in bound_apps),
            all(answers_liveness(bound.app) for bound in bound_apps),
        ),
        proxy_headers=False,
        timeout_keep_alive=SERVER_KEEPALIVE_S,
        timeout_graceful_shutdown=5,
        access_log=False,
        log_level="warning",
    )
    uvicorn.Server(config).run(sockets=sockets)


def _tune_gc_for_serving() -> None:
    """Keep what the server built at startup (modules, app, schemas: most of its objects) out of every
    later garbage collection, and collect less often. Full collections otherwise walked them all, several
    times a second under load, each stalling the event loop for 50-150 ms. Done before forking, so workers
    share those pages."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _sockets_per_worker(sockets: list[socket.socket], num_workers: int) -> list[list[socket.socket]]:
    """For each worker, its own listening socket on each address (SO_REUSEPORT).

    Workers sharing one socket do not share its connections: whichever wakes first accepts a whole burst,
    and a trainer's keep-alive connections then all land on one worker (seen: 32 of 32, the other core
    idle). Separate sockets in one SO_REUSEPORT group get connections spread by the kernel instead. Only
    processes of the same user that ask for SO_REUSEPORT can join the group; a plain bind still fails.
    Without SO_REUSEPORT (not Linux or BSD), the workers share the inherited sockets.
    """
    if not hasattr(socket, "SO_REUSEPORT"):
        return [sockets] * num_workers
    addresses = [sock.getsockname()[:2] for sock in sockets]
    for sock in sockets:
        sock.close()  # the port is free for a moment: rebound at once below, or the server exits naming it
    try:
        return [
            [bind_listening_socket(host, port, reuse_port=True) for host, port in addresses]
            for _ in range(num_workers)
        ]
    except OSError as error:
        sys.exit(f"Error: cannot listen again on {addresses} for the workers ({error.strerror or error})")


def _fork_workers(count: int) -> int:
    """Fork `count` workers; returns this process's worker number (0 for the first, which serves too and
    stops when any worker exits)."""
    parent = os.getpid()
    workers = []
    for number in range(1, count + 1):
        pid = os.fork()
        if pid == 0:
            die_with_parent(signal.SIGTERM)
            if os.getppid() != parent:
                os._exit(1)
            return number
        workers.append(pid)
    for pid in workers:
        # A thread waiting on that one pid, not a SIGCHLD handler: those would also reap the server's other
        # children (a verifier's subprocess, the CPU pool), and the event loop may take SIGCHLD over.
        threading.Thread(target=_stop_when_worker_exits, args=(pid,), daemon=True).start()
    return 0


def _stop_when_worker_exits(pid: int) -> None:
    _, status = os.waitpid(pid, 0)
    asked_to_stop = os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGTERM, signal.SIGINT)
    if not asked_to_stop and os.waitstatus_to_exitcode(status) != 0:
        logger.error("worker %d exited (%d); stopping this server", pid, os.waitstatus_to_exitcode(status))
    os.kill(os.getpid(), signal.SIGTERM)


class SimpleServer(BaseServer):
    """A server with a FastAPI app, started by `run_webserver()` from its `app.py`."""

    server_client: ServerClient

    def setup_webserver(self) -> FastAPI:
        raise NotImplementedError

    @property
    def server_label(self) -> str:
        """`<ServerClass>___<instance>`: the session cookie name and the `server` of error bodies."""
        return session_cookie_name(type(self).__name__, self.config.name)

    def setup_session_middleware(self, app: FastAPI) -> None:
        install_session_middleware(app, self.server_label, deployment_session_secret())

    @classmethod
    def load_config(cls, global_config_dict: DictConfig, instance_name: str) -> BaseRunServerInstanceConfig:
        config_class = cls.model_fields["config"].annotation
        return config_class.model_validate(resolve_instance_config(global_config_dict, instance_name))

    @classmethod
    def run_webserver(cls) -> None:
        """Build this server from the launcher's config file and serve until stopped."""
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        _exit_with_the_launcher()
        instance_name = os.environ.get(NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME)
        if not instance_name:
            sys.exit(f"Error: {NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME} must name this server's instance.")
        try:
            global_config_dict = get_global_config_dict()
            if global_config_dict.get("verbose"):  # `gym ... -v`: debug logging in every server
                logging.getLogger().setLevel(logging.DEBUG)
            config = cls.load_config(global_config_dict, instance_name)
            if logger.isEnabledFor(logging.DEBUG):  # the masked dump is not made for nothing
                logger.debug("%s: settings %s", instance_name, mask_secrets(config.model_dump(mode="json")))
            configure_http_client_from(global_config_dict, config.num_workers)
            limits = RequestLimits.from_config(global_config_dict)
            server = cls(
                config=config,
                server_client=ServerClient(
                    head_server_config=head_server_config_from(global_config_dict),
                    global_config_dict=global_config_dict,
                ),
            )
            # A server checks its own settings (files it loads, values it parses) while setting up.
            app = finalize_app(server.setup_webserver(), server.server_label)
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))} ({e['msg']})" for e in error.errors())
            sys.exit(f"Error: invalid config for server instance '{instance_name}': {problems}")
        except ConfigError as error:
            sys.exit(f"Error: server instance '{instance_name}': {error}")
        if os.environ.get(CHECK_CONFIG_ONLY_ENV_VAR_NAME) == "1":
            sys.exit(0)
        _raise_open_file_limit()
        sock = _listening_socket(instance_name, config)
        _report_bound_address(sock)
        logger.info("%s listening on %s:%d", server.server_label, *sock.getsockname()[:2])
        bound = BoundApp(instance_name, app, sock)
        if _colocation_collector is not None:
            _colocation_collector.append(bound)
            return
        serve([bound], limits, config.num_workers or 1)


class RunningServer:
    """A uvicorn server serving in a daemon thread of this process (the head server's way to run)."""

    def __init__(self, app: FastAPI, sock: socket.socket, limits: RequestLimits) -> None:
        self.host, self.port = sock.getsockname()[:2]
        self._server = uvicorn.Server(
            uvicorn.Config(
                app,
                loop="asyncio",
                http=gym_protocol(limits, HeadServer.SERVER_LABEL, answers_liveness(app)),
                access_log=False,
                log_level="warning",
                timeout_keep_alive=SERVER_KEEPALIVE_S,
            )
        )
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout_s)


class HeadServer(BaseModel):
    """Serves the deployment's merged config (secrets masked) and its list of server instances, which the
    launcher replaces each time it spawns a server (an instance is listed from then on, before it is up)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    SERVER_LABEL: ClassVar[str] = "HeadServer"

    config: BaseServerConfig
    global_config_dict: DictConfig
    server_instances: list[dict[str, Any]] = []

    def setup_webserver(self) -> FastAPI:
        app = new_app()
        masked_yaml = to_yaml(self.global_config_dict, mask=True)

        @app.get("/global_config_dict_yaml")
        async def global_config_dict_yaml() -> str:
            return masked_yaml

        @app.get("/server_instances")
        async def server_instances() -> list[dict[str, Any]]:
            return self.server_instances

        return finalize_app(app, self.SERVER_LABEL)

    def start_in_thread(self) -> RunningServer:
        return RunningServer(
            self.setup_webserver(),
            bind_listening_socket(self.config.host, self.config.port),
            RequestLimits.from_config(self.global_config_dict),
        )
