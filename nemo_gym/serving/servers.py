"""Server plumbing: addressing peers by instance name, the server base classes, and the head server.

A server process is started with the path of the merged config file and its own instance name; it
validates its inner config with the class's declared config model, builds a FastAPI app with liveness,
signed sessions and the one error format of `nemo_gym.http.errors`, and hands it to `nemo_gym.serving.workers`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import urllib.error
import urllib.request
from typing import Any, ClassVar, Literal

import aiohttp
import uvicorn
import yaml
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError
from starlette.middleware import Middleware

from nemo_gym.config.defaults import DEFAULT_HEAD_SERVER_PORT as DEFAULT_HEAD_SERVER_PORT
from nemo_gym.config.deployment import (
    DeploymentSettings,
    HTTPClientSettings,
    deployment_settings,
    http_client_settings,
)
from nemo_gym.config.discovery import get_first_server_config_dict, resolve_instance_config
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.global_config import get_global_config_dict
from nemo_gym.config.key_names import HEAD_SERVER_KEY_NAME as HEAD_SERVER_KEY_NAME
from nemo_gym.config.key_names import NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME
from nemo_gym.config.masking import mask_secrets, to_yaml
from nemo_gym.config.server_instances import BaseRunServerInstanceConfig as BaseRunServerInstanceConfig
from nemo_gym.config.server_instances import BaseServerConfig as BaseServerConfig
from nemo_gym.config.server_instances import unknown_setting
from nemo_gym.config.server_kinds import server_type_of
from nemo_gym.http.client import (
    MAX_NUM_TRIES,
    RetryPolicy,
    close_global_aiohttp_client,
    configure_http_client,
    get_response_json,
    raise_for_status,
    request,
)
from nemo_gym.http.deadlines import CallerDeadlineMiddleware
from nemo_gym.http.errors import ErrorEnvelopeMiddleware
from nemo_gym.http.in_process import LocalResponse, call_in_process, is_hosted_here
from nemo_gym.http.protocol import RequestLimits, gym_protocol
from nemo_gym.http.request_bodies import OrjsonBodyRoute, validation_error_response
from nemo_gym.http.rollout_paths import RolloutPrefixMiddleware
from nemo_gym.http.rollout_paths import rollout_path_prefix as rollout_path_prefix
from nemo_gym.http.sessions import SESSION_ID_KEY as SESSION_ID_KEY
from nemo_gym.http.sessions import deployment_session_secret, install_session_middleware, session_cookie_name
from nemo_gym.serving.cpu_pool import shutdown_pool, use_backend
from nemo_gym.serving.ray_cluster import initialize_ray, server_uses_ray, shutdown_ray

# Process serving lives in nemo_gym.serving.workers; the names below stay importable from here.
from nemo_gym.serving.workers import (
    BOUND_ADDRESS_FILE_ENV_VAR_NAME as BOUND_ADDRESS_FILE_ENV_VAR_NAME,
)
from nemo_gym.serving.workers import (
    GC_THRESHOLDS as GC_THRESHOLDS,
)
from nemo_gym.serving.workers import (
    LAUNCHER_PID_ENV_VAR_NAME as LAUNCHER_PID_ENV_VAR_NAME,
)
from nemo_gym.serving.workers import (
    LISTEN_FD_ENV_VAR_NAME as LISTEN_FD_ENV_VAR_NAME,
)
from nemo_gym.serving.workers import (
    SERVER_KEEPALIVE_S,
    BoundApp,
    answers_liveness,
    bind_listening_socket,
    exit_with_the_launcher,
    listening_socket,
    liveness,
    raise_open_file_limit,
    serve_instance,
)
from nemo_gym.serving.workers import (
    TARGET_NOFILE_LIMIT as TARGET_NOFILE_LIMIT,
)
from nemo_gym.serving.workers import (
    PortDispatcher as PortDispatcher,
)
from nemo_gym.serving.workers import (
    serve as serve,
)
from nemo_gym.telemetry import tracing
from nemo_gym.telemetry.metrics import ServerIdentity, install_metrics, metrics_enabled
from nemo_gym.wire.validation_errors import describe_validation_error

__all__ = [
    "MAX_NUM_TRIES",
    "BaseServer",
    "HeadServer",
    "ServerClient",
    "ServerStatus",
    "apply_rollout_prefix",
    "rollout_path_prefix",
    "SimpleServer",
    "get_response_json",
    "get_server_url",
    "is_nemo_gym_fastapi_entrypoint",
    "setup_server_client",
    "raise_for_status",
    "request",
]

logger = logging.getLogger("nemo_gym.server")

# Set by `gym validate`: build the server from its config (validating it and the files setup loads), then
# exit 0 without binding or serving.
CHECK_CONFIG_ONLY_ENV_VAR_NAME = "NEMO_GYM_CHECK_CONFIG_ONLY"
HEAD_CONFIG_FETCH_TIMEOUT_S = 10.0
# Set by a server that serves its app through an ASGI import of its app.py (NeMo Gym's multi-worker way):
# the file whose import must build the app. Gym's own launcher serves each app directly and never sets it.
IS_NEMO_GYM_FASTAPI_ENTRYPOINT_KEY_NAME = "NEMO_GYM_FASTAPI_ENTRYPOINT"

ServerStatus = Literal["success", "connection_error", "timeout", "unknown_error"]


def is_nemo_gym_fastapi_entrypoint(file: str) -> bool:
    """Whether `file` (an app.py's `__file__`) is being imported to build the app an ASGI server serves."""
    entrypoint = os.environ.get(IS_NEMO_GYM_FASTAPI_ENTRYPOINT_KEY_NAME)
    return bool(entrypoint) and os.path.realpath(entrypoint) == os.path.realpath(file)


def get_server_url(server_name: str) -> str:
    """`http://host:port` of a server instance of this process's config."""
    inner = get_first_server_config_dict(get_global_config_dict(), server_name)
    return f"http://{inner['host']}:{inner['port']}"


def apply_rollout_prefix(base_url: str, rollout_id: str | None, *, token_capture: bool = False) -> str:
    return base_url.rstrip("/") + rollout_path_prefix(rollout_id, token_capture=token_capture)


def setup_server_client(head_server_config: BaseServerConfig | None = None) -> ServerClient:
    """A client of the running deployment whose head server is `head_server_config` (default: this
    process's config's head server)."""
    return ServerClient.load_from_global_config(head_server_config)


def head_server_config_from(global_config_dict: DictConfig) -> BaseServerConfig:
    return head_server_address(deployment_settings(global_config_dict))


def head_server_address(settings: DeploymentSettings) -> BaseServerConfig:
    return BaseServerConfig(host=settings.head_server_host, port=settings.head_server_port)


def configure_http_client_from(global_config_dict: DictConfig, num_workers: int | None = None) -> None:
    """Apply the `global_aiohttp_*` / `global_http_*` knobs of a config to this process."""
    apply_http_client_settings(http_client_settings(global_config_dict), num_workers)


def apply_http_client_settings(settings: HTTPClientSettings, num_workers: int | None = None) -> None:
    """Apply checked outbound-client knobs to this process; the pool limits are shared by the server's
    `num_workers` worker processes."""
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

    @classmethod
    def load_head_server_config(cls) -> BaseServerConfig:
        return head_server_config_from(get_global_config_dict())

    def poll_for_status(self, server_name: str, *, timeout_seconds: float = 5) -> ServerStatus:
        """Whether `server_name` (or the head server, named `head_server`) answers `GET /` now."""
        if server_name == HEAD_SERVER_KEY_NAME:
            url = f"http://{self.head_server_config.host}:{self.head_server_config.port}/"
        else:
            url = self.server_base_url(server_name) + "/"
        try:
            with urllib.request.urlopen(url, timeout=timeout_seconds):
                return "success"
        except TimeoutError:
            return "timeout"
        except urllib.error.HTTPError:
            return "unknown_error"
        except urllib.error.URLError as error:
            return "timeout" if isinstance(error.reason, TimeoutError) else "connection_error"
        except OSError:
            return "connection_error"

    def server_base_url(self, server_name: str) -> str:
        """Raises `ServerRefNotFoundError` (naming the known instances) for an unknown name."""
        url = self._base_urls.get(server_name)
        if url is None:
            inner = get_first_server_config_dict(self.global_config_dict, server_name)
            url = self._base_urls[server_name] = f"http://{inner['host']}:{inner['port']}"
        return url

    def use_address(self, server_name: str, base_url: str) -> None:
        """Call `server_name` at `base_url` from now on (a live replica of a sharded server, when the one
        the config named is gone)."""
        self._base_urls[server_name] = base_url

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


def new_app() -> FastAPI:
    """The FastAPI app every Gym server starts from (routes added to it parse bodies with orjson). FastAPI's
    own telemetry is off: Gym's spans (`nemo_gym.telemetry.tracing`) and `/metrics` cover a request, and with it on
    FastAPI would look up OpenTelemetry's global providers on every request once tracing is loaded."""
    app = FastAPI(
        exception_handlers={RequestValidationError: validation_error_response},
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.router.route_class = OrjsonBodyRoute
    return app


# NeMo Gym 0.7's health routes: every server answers them as `GET /`, as soon as it serves.
HEALTH_PATHS = ("/", "/health", "/healthz", "/livez", "/readyz")


def finalize_app(app: FastAPI, server_label: str) -> FastAPI:
    """Add what every Gym server has: `GET /` liveness and the health routes (those the app does not
    answer itself), calls under a rollout's path prefix, the caller's deadline taken up, and the error
    format (innermost middleware, so error responses still carry the session cookie)."""
    taken = {getattr(route, "path", None) for route in app.router.routes}
    for path in HEALTH_PATHS:
        if path not in taken:
            app.add_api_route(path, liveness, methods=["GET"])
    app.router.on_shutdown.append(close_global_aiohttp_client)
    app.router.on_shutdown.append(shutdown_pool)
    app.user_middleware.append(Middleware(RolloutPrefixMiddleware))
    app.user_middleware.append(Middleware(CallerDeadlineMiddleware))
    app.user_middleware.append(Middleware(ErrorEnvelopeMiddleware, server_label=server_label))
    return app


class SimpleServer(BaseServer):
    """A server with a FastAPI app, started by `run_webserver()` from its `app.py`.

    `ray_enabled = True` (NeMo Gym 0.7's declaration) joins the deployment's Ray cluster
    (`ray_head_node_address`) before the server is built, so the folder's own `ray.remote` / `ray.get` run
    there. Undeclared means no Ray, unlike 0.7, which joins with a warning: a server that never uses Ray
    should not pay for loading it.
    """

    ray_enabled: ClassVar[bool | None] = None
    server_client: ServerClient

    def setup_webserver(self) -> FastAPI:
        raise NotImplementedError

    def complete_app(self, app: FastAPI) -> FastAPI:
        """A last look at the app once `setup_webserver()` (the server's own and its subclasses') is done."""
        return app

    @property
    def server_label(self) -> str:
        """`<ServerClass>___<instance>`: the session cookie name and the `server` of error bodies."""
        return session_cookie_name(type(self).__name__, self.config.name)

    def setup_session_middleware(self, app: FastAPI) -> None:
        install_session_middleware(app, self.server_label, deployment_session_secret())

    @classmethod
    def load_config(cls, global_config_dict: DictConfig, instance_name: str) -> BaseRunServerInstanceConfig:
        config_class = cls.model_fields["config"].annotation
        inner = resolve_instance_config(global_config_dict, instance_name)
        problem = unknown_setting(config_class, inner)
        if (
            problem is not None
        ):  # before validating: a misspelled required key is the unknown one, not the missing one
            raise ConfigError(problem)
        return config_class.model_validate(inner)

    @classmethod
    def run_webserver(cls) -> None:
        """Build this server from the launcher's config file and serve until stopped."""
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        exit_with_the_launcher()
        instance_name = os.environ.get(NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME)
        if not instance_name:
            sys.exit(f"Error: {NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME} must name this server's instance.")
        try:
            global_config_dict = get_global_config_dict()
            # Read and checked once here, then passed down: nothing below goes back to the raw config for them.
            settings = deployment_settings(global_config_dict)
            knobs = settings.knobs
            if knobs.verbose:  # `gym ... -v`: debug logging
                logging.getLogger().setLevel(logging.DEBUG)
            config = cls.load_config(global_config_dict, instance_name)
            if logger.isEnabledFor(logging.DEBUG):  # the masked dump is not made for nothing
                logger.debug("%s: settings %s", instance_name, mask_secrets(config.model_dump(mode="json")))
            apply_http_client_settings(settings.http_client, config.num_workers)
            limits = RequestLimits.of(knobs)
            use_backend(knobs.cpu_pool_backend, global_config_dict)  # a `ray` pool joins on its first call
            if server_uses_ray(cls):
                join_ray_before_setup(config.num_workers, global_config_dict)
            server = cls(
                config=config,
                server_client=ServerClient(
                    head_server_config=head_server_address(settings),
                    global_config_dict=global_config_dict,
                ),
            )
            # A server checks its own settings (files it loads, values it parses) while setting up.
            app = finalize_app(server.complete_app(server.setup_webserver()), server.server_label)
            tracing.start(instance_name)  # once per process; co-hosted servers share the first one's
            server_type = server_type_of(global_config_dict.get(instance_name) or {})
            tracing.instrument_app(app, instance_name, server_type)
            if server_uses_ray(cls):
                app.router.on_shutdown.append(shutdown_ray)
            with_metrics = metrics_enabled(global_config_dict)
        except ValidationError as error:
            problems = describe_validation_error(error)
            sys.exit(f"Error: invalid config for server instance '{instance_name}': {problems}")
        except ConfigError as error:
            sys.exit(f"Error: server instance '{instance_name}': {error}")
        if os.environ.get(CHECK_CONFIG_ONLY_ENV_VAR_NAME) == "1":
            sys.exit(0)
        if with_metrics:
            install_metrics(app, ServerIdentity(instance_name, server_type))
        raise_open_file_limit()
        bound = BoundApp(instance_name, app, listening_socket(instance_name, config))
        serve_instance(bound, server.server_label, limits, config.num_workers or 1)


def join_ray_before_setup(num_workers: int | None, global_config_dict: DictConfig) -> None:
    """Join the cluster for a `ray_enabled` server. Its setup may already use Ray, so this comes before
    forked workers would; Ray's client does not survive a fork, hence one worker only."""
    if (num_workers or 1) > 1:
        raise ConfigError(
            f"num_workers is {num_workers}, but a ray_enabled server's connection to Ray cannot be shared "
            "by forked workers; set num_workers: 1"
        )
    initialize_ray(global_config_dict)


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

    def is_alive(self) -> bool:
        return self._thread.is_alive()

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
    # Set by the launcher once every server answers: until then the readiness routes answer 503.
    ready: bool = False
    _masked_yaml: str = PrivateAttr(default="")

    def publish_config(self) -> None:
        """Serve the config as it is now (the launcher changed it: a shard replica moved)."""
        self._masked_yaml = to_yaml(self.global_config_dict, mask=True)

    def setup_webserver(self) -> FastAPI:
        app = new_app()
        self.publish_config()

        async def readiness() -> JSONResponse:
            if self.ready:
                return JSONResponse({"status": "ok"})
            return JSONResponse({"status": "starting"}, status_code=503)

        for path in ("/readyz", "/healthz", "/health"):
            app.add_api_route(path, readiness, methods=["GET"])

        @app.get("/global_config_dict_yaml")
        async def global_config_dict_yaml() -> str:
            return self._masked_yaml

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
