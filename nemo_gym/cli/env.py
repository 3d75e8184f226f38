"""`RunHelper`: a whole deployment started inside another program, the way NeMo RL, verl and TRL start one.

The trainer calls `start()` from its own code (often a thread that already runs an event loop), then
collects rollouts over HTTP, calls `poll()` now and then, and `shutdown()` at the end. The deployment runs
its own event loop in a thread of its own, so it never touches the caller's loop, and nothing of the
caller's (its HTTP session above all) is closed by `shutdown()`.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import sys
import threading

from nemo_gym.config.global_config import GlobalConfigDictParserConfig, set_global_config_dict
from nemo_gym.http.client import close_global_aiohttp_client
from nemo_gym.launch.child_processes import KILL_WAIT_S, OUTPUT_DRAIN_S
from nemo_gym.launch.deployment import STOP_GRACE_S, Deployment, DeploymentError
from nemo_gym.launch.launcher import unless_stop_requested

# Beyond the deployment's own readiness deadline, the time start() allows for its bookkeeping.
START_MARGIN_S = 30.0
# How long shutdown() waits for every server to stop: their grace period, the kill, the last output and
# the head server's own stop, with room to spare.
SHUTDOWN_DEADLINE_S = STOP_GRACE_S + KILL_WAIT_S + OUTPUT_DRAIN_S + 10.0
RUN_FOREVER_POLL_S = 60.0


class RunHelper:
    """Start a deployment from a config built in memory; `poll()` to learn whether it still runs;
    `shutdown()` to stop every server (also done at interpreter exit if the caller forgets)."""

    def __init__(self) -> None:
        self._deployment: Deployment | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self, global_config_dict_parser_config: GlobalConfigDictParserConfig) -> None:
        """Parse the config, start the head server and every server, and return once all answer.

        The parsed config becomes this process's config (`get_global_config_dict()`). On any failure,
        whatever was started is stopped before the error is raised again.
        """
        if self._thread is not None:
            raise RuntimeError("RunHelper.start() was already called; call shutdown() first")
        deployment = Deployment(parser_config=global_config_dict_parser_config)
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._deployment, self._loop = deployment, asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._serve, args=(deployment, self._loop, ready), name="gym-deployment", daemon=True
        )
        atexit.register(self.shutdown)
        self._thread.start()
        try:
            ready.result(timeout=deployment.readiness_deadline_s + START_MARGIN_S)
        except BaseException as error:
            self.shutdown()
            if isinstance(error, concurrent.futures.TimeoutError):
                raise DeploymentError(
                    f"The deployment was not up within {deployment.readiness_deadline_s + START_MARGIN_S:g}s"
                ) from None
            raise
        set_global_config_dict(global_config_dict=deployment.global_config_dict)

    def poll(self) -> None:
        """Return if the deployment runs; else raise RuntimeError naming what stopped and its last output."""
        if self._deployment is None or self._thread is None:
            raise RuntimeError(
                "The Gym deployment is not running: RunHelper.start() was not called, or shutdown() was"
            )
        if not self._thread.is_alive():
            raise RuntimeError("The Gym deployment stopped unexpectedly")
        try:
            self._deployment.raise_if_not_running()
        except DeploymentError as error:
            raise RuntimeError(str(error)) from None

    def shutdown(self) -> None:
        """Stop every server and the head server; a second call does nothing."""
        thread, loop, deployment = self._thread, self._loop, self._deployment
        self._thread = None
        atexit.unregister(self.shutdown)
        if thread is None or deployment is None:
            return
        if loop is not None and thread.is_alive():
            try:
                loop.call_soon_threadsafe(deployment.request_stop)
            except RuntimeError:  # the loop already closed: the thread is ending by itself
                pass
        thread.join(SHUTDOWN_DEADLINE_S)
        if thread.is_alive():
            print(
                f"Warning: the Gym deployment did not stop within {SHUTDOWN_DEADLINE_S:g}s.",
                file=sys.stderr,
                flush=True,
            )

    def run_forever(self) -> None:
        """Poll until a server stops (then raise) or Ctrl-C (then shut down)."""
        try:
            while True:
                self.poll()
                assert self._thread is not None
                self._thread.join(RUN_FOREVER_POLL_S)
        finally:
            self.shutdown()

    def display_server_instance_info(self) -> None:
        if self._deployment is None:
            print("No server instances to display.")
            return
        self._deployment.print_server_table()

    def _serve(
        self, deployment: Deployment, loop: asyncio.AbstractEventLoop, ready: concurrent.futures.Future[None]
    ) -> None:
        try:
            loop.run_until_complete(self._run(deployment, ready))
        except BaseException as error:  # the caller learns of it through `ready` or poll()
            if not ready.done():
                ready.set_exception(error)
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _run(self, deployment: Deployment, ready: concurrent.futures.Future[None]) -> None:
        try:
            if not await unless_stop_requested(deployment, deployment.start()):
                ready.set_exception(DeploymentError("The deployment was stopped while starting"))
                return
            ready.set_result(None)
            await deployment.stop_requested.wait()
        finally:
            await deployment.stop()
            await close_global_aiohttp_client()
