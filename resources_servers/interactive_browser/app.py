"""interactive_browser: a live headless browser per rollout, driven by tool calls, rewarded on the end state.

Each rollout (session) gets its own browser context in the server's one Chromium, opened at the task's
`initial_url`. The policy acts with browser_navigate / browser_click / browser_type / browser_observe and
ends with browser_finish(answer). `/verify` scores the session's final state against the task's
`verifier_metadata` (one of final_url, url_contains, dom_contains, answer_equals) with a 0/1 reward, then
closes the context. A state that cannot be read (the session is gone, the page is stuck) is masked with its
reason, never scored 0.

Pages are this folder's `site/` files (or http pages on 127.0.0.1 / localhost): every other request is
aborted before it leaves the browser. Contexts are capped (`max_contexts`: a new session past it closes the
least recently used idle one), closed on verify, on `/close_session`, on a re-seed of the same session and
after `idle_timeout_s` without a call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictInt, StrictStr, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ResourcesCloseSessionRequest,
    ResourcesCloseSessionResponse,
    SimpleResourcesServer,
)
from nemo_gym.config_types import ConfigError
from nemo_gym.http.errors import GymError
from nemo_gym.http.sessions import get_session_id
from nemo_gym.wire.failure_kinds import SESSION_LOST, VERIFIER_ERROR
from resources_servers.interactive_browser.browser import (
    Browser,
    BrowserActionError,
    Page,
    UrlPolicy,
    find_chromium,
    playwright_missing,
)

logger = logging.getLogger(__name__)
FOLDER = Path(__file__).resolve().parent
SCORING_KEYS = ("final_url", "url_contains", "dom_contains", "answer_equals")


class InteractiveBrowserConfig(BaseResourcesServerConfig):
    # Chromium to launch; null finds Debian's `chromium` (or `chromium-browser`) on PATH.
    chromium_path: str | None = None
    # Folder of the local pages, relative to this environment's folder.
    site_dir: str = "site"
    # Hosts pages may load over http(s) besides the site files; every other request is aborted.
    allowed_hosts: list[str] = Field(default_factory=lambda: ["127.0.0.1", "localhost"])
    max_elements: int = Field(default=50, ge=0)
    max_text_chars: int = Field(default=2000, ge=0)
    action_timeout_s: float = Field(default=15.0, gt=0)
    idle_timeout_s: float = Field(default=600.0, gt=0)
    max_contexts: int = Field(default=16, ge=1)


class BrowserSeedSessionRequest(BaseSeedSessionRequest):
    model_config = ConfigDict(extra="allow")

    initial_url: str = "about:blank"
    verifier_metadata: dict[str, Any] | None = None

    @field_validator("verifier_metadata")
    @classmethod
    def _one_known_key(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """A misspelled key would score every rollout 0; refuse the row instead."""
        if value is not None and not any(key in value for key in SCORING_KEYS):
            raise ValueError(f"needs one of {', '.join(SCORING_KEYS)}; got {sorted(value)}")
        return value


class NavigateRequest(BaseModel):
    url: StrictStr


class ElementRequest(BaseModel):
    element_id: StrictInt


class TypeRequest(BaseModel):
    element_id: StrictInt
    text: StrictStr


class FinishRequest(BaseModel):
    answer: StrictStr = ""


class ToolResponse(BaseModel):
    observation: str
    done: bool = False
    error: str | None = None


class BrowserVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    verifier_metadata: dict[str, Any] | None = None


class BrowserVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    final_url: str | None = None
    answer: str | None = None


@dataclass
class Session:
    page: Page
    spec: dict[str, Any]
    answer: str | None = None
    last_used: float = field(default_factory=time.monotonic)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class InteractiveBrowserResourcesServer(SimpleResourcesServer):
    config: InteractiveBrowserConfig
    _browser: Browser | None = PrivateAttr(default=None)
    _policy: UrlPolicy | None = PrivateAttr(default=None)
    _live: dict[str, Session] = PrivateAttr(default_factory=dict)
    _reaper: asyncio.Task | None = PrivateAttr(default=None)

    def setup_webserver(self) -> FastAPI:
        """Refuse to start without Playwright or Chromium: every rollout would fail, one by one."""
        missing = playwright_missing()
        if missing is not None:
            raise ConfigError(f"interactive_browser needs a browser: {missing}")
        executable = find_chromium(self.config.chromium_path)
        if executable is None:
            wanted = self.config.chromium_path or "chromium (or chromium-browser) on PATH"
            raise ConfigError(
                f"interactive_browser needs Chromium and found no {wanted}; install Debian's chromium "
                "(`make browser-tools`) or set chromium_path"
            )
        site = (FOLDER / self.config.site_dir).resolve()
        if not site.is_dir():
            raise ConfigError(f"site_dir {self.config.site_dir!r} is not a folder of {FOLDER}")
        self._policy = UrlPolicy(site, self.config.allowed_hosts)
        self._browser = Browser(
            executable, self._policy, self.config.action_timeout_s, self.config.max_elements
        )
        app = super().setup_webserver()
        for name in ("navigate", "click", "type", "observe", "finish"):
            app.post(f"/browser_{name}")(getattr(self, f"browser_{name}"))
        app.router.on_shutdown.append(self._shutdown)
        return app

    # ----- sessions ------------------------------------------------------------------------------------

    async def seed_session(
        self, request: Request, body: BrowserSeedSessionRequest
    ) -> BaseSeedSessionResponse:
        session_id = get_session_id(request)
        await self._release(session_id)  # a re-seed starts over, never leaks the old context
        self._ensure_reaper()
        await self._reap_idle()
        if len(self._live) >= self.config.max_contexts:
            await self._evict_least_recently_used()
        assert self._browser is not None
        try:
            page = await asyncio.wait_for(self._browser.new_page(), self.config.action_timeout_s + 30.0)
        except Exception as error:
            raise GymError(
                503, "browser_unavailable", f"could not open a browser context: {error}"
            ) from error
        session = Session(page=page, spec=dict(body.verifier_metadata or {}))
        self._live[session_id] = session
        if body.initial_url and body.initial_url != "about:blank":
            try:
                async with session.lock:  # the idle reaper leaves a busy session alone
                    await page.goto(body.initial_url)
                    await page.observe()  # numbers the elements, so ids work before the model's first observe
            except BrowserActionError as error:
                await self._release(session_id)
                raise GymError(422, "bad_initial_url", f"initial_url: {error}") from error
            finally:
                session.last_used = time.monotonic()
        return BaseSeedSessionResponse()

    async def close_resources_session(
        self, body: ResourcesCloseSessionRequest
    ) -> ResourcesCloseSessionResponse:
        await self._release(body.resources_session_id)
        return await super().close_resources_session(body)

    async def _release(self, session_id: str) -> None:
        session = self._live.pop(session_id, None)
        if session is not None:
            try:
                await session.page.close()
            except Exception:
                logger.warning("could not close the browser context of session %s", session_id, exc_info=True)

    async def _evict_least_recently_used(self) -> None:
        """Make room for a new session by closing the one idle longest (abandoned rollouts must not lock
        new ones out until their idle timeout); a 503 only when every open session is mid-action."""
        idle = [(s.last_used, sid) for sid, s in self._live.items() if not s.lock.locked()]
        if not idle:
            raise GymError(
                503,
                "browser_busy",
                f"{len(self._live)} browser sessions are open and busy (max_contexts="
                f"{self.config.max_contexts}); retry when a rollout finishes",
            )
        _, session_id = min(idle)
        logger.info(
            "closing browser session %s: max_contexts reached, it was used least recently", session_id
        )
        await self._release(session_id)

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def _reap_forever(self) -> None:
        period = min(max(self.config.idle_timeout_s / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(period)
            try:
                await self._reap_idle()
            except Exception:
                logger.warning("idle browser sessions could not be reaped", exc_info=True)

    async def _reap_idle(self) -> None:
        cutoff = time.monotonic() - self.config.idle_timeout_s
        for session_id in [
            sid for sid, s in self._live.items() if s.last_used < cutoff and not s.lock.locked()
        ]:
            logger.info(
                "closing browser session %s: idle for over %gs", session_id, self.config.idle_timeout_s
            )
            await self._release(session_id)

    async def _shutdown(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for session_id in list(self._live):
            await self._release(session_id)
        if self._browser is not None:
            await self._browser.close()

    # ----- tools (a failed action is the tool's error, for the model to read) ----------------------------

    async def _act(self, request: Request, action: Any = None) -> ToolResponse:
        session = self._live.get(get_session_id(request))
        if session is None:
            return ToolResponse(
                observation="", error="no open browser session: it was never seeded, was closed or timed out"
            )
        async with session.lock:
            session.last_used = time.monotonic()
            try:
                if action is not None:
                    await action(session.page)
                seen = await session.page.observe()
                return ToolResponse(observation=seen.render(self.config.max_text_chars))
            except BrowserActionError as error:
                return ToolResponse(observation="", error=str(error))
            finally:
                session.last_used = time.monotonic()

    async def browser_navigate(self, request: Request, body: NavigateRequest) -> ToolResponse:
        return await self._act(request, lambda page: page.goto(body.url))

    async def browser_click(self, request: Request, body: ElementRequest) -> ToolResponse:
        return await self._act(request, lambda page: page.click(body.element_id))

    async def browser_type(self, request: Request, body: TypeRequest) -> ToolResponse:
        return await self._act(request, lambda page: page.type(body.element_id, body.text))

    async def browser_observe(self, request: Request) -> ToolResponse:
        return await self._act(request)

    async def browser_finish(self, request: Request, body: FinishRequest) -> ToolResponse:
        session = self._live.get(get_session_id(request))
        if session is None:
            return ToolResponse(observation="", error="no open browser session to finish")
        session.answer = body.answer
        session.last_used = time.monotonic()
        return ToolResponse(observation="Task ended; the final state is being checked.", done=True)

    # ----- reward ----------------------------------------------------------------------------------------

    async def verify(self, request: Request, body: BrowserVerifyRequest) -> BrowserVerifyResponse:
        """1.0 when the session's end state meets the spec, else 0.0; an unreadable state is masked."""
        row = body.model_dump(exclude={"reward", "mask_sample", "failure_kind", "failure_reason"})
        session_id = get_session_id(request)
        session = self._live.get(session_id)
        if session is None:
            return BrowserVerifyResponse(
                **row,
                reward=0.0,
                mask_sample=True,
                failure_kind=SESSION_LOST,
                failure_reason="no browser session at verify: never seeded, already verified, closed or idle too long",
            )
        spec = session.spec or dict(body.verifier_metadata or {})
        try:
            async with session.lock:
                reward = await self._score(session, spec)
            return BrowserVerifyResponse(
                **row, reward=reward, final_url=self._policy_display(session), answer=session.answer
            )
        except (BrowserActionError, ValueError) as error:
            return BrowserVerifyResponse(
                **row,
                reward=0.0,
                mask_sample=True,
                failure_kind=VERIFIER_ERROR,
                failure_reason=f"the browser state could not be scored: {error}",
                answer=session.answer,
            )
        finally:
            await self._release(session_id)

    def _policy_display(self, session: Session) -> str:
        assert self._policy is not None
        return self._policy.display(session.page.url())

    async def _score(self, session: Session, spec: dict[str, Any]) -> float:
        assert self._policy is not None
        if "answer_equals" in spec:
            return float((session.answer or "").strip() == str(spec["answer_equals"]).strip())
        if "final_url" in spec:
            return float(session.page.url() == self._policy.resolve(str(spec["final_url"])))
        if "url_contains" in spec:
            return float(str(spec["url_contains"]) in session.page.url())
        if "dom_contains" in spec:
            return float(str(spec["dom_contains"]).lower() in (await session.page.text()).lower())
        raise ValueError(f"verifier_metadata needs one of {', '.join(SCORING_KEYS)}; got {sorted(spec)}")


if __name__ == "__main__":
    InteractiveBrowserResourcesServer.run_webserver()
