"""One headless Chromium per server process, driven through Playwright, and one browser context per rollout.

Everything that touches the browser is here so that app.py only deals with sessions, tools and rewards.
Playwright is imported lazily: this module (and `find_chromium`) loads without it, so a machine without
the package or the browser can still say clearly why the environment cannot run.

Network policy: a page may only load `file://` URLs inside the site folder and `http(s)://` URLs on the
allowed local hosts. Every request of every page goes through a route handler that aborts anything else,
websockets included, and Chromium's own host resolver maps every other host name to nothing, so a request
the route handler would miss still cannot reach the network.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

T = TypeVar("T")

# Quiet and offline: no sign-in, sync, updates, crash reports or other calls home.
CHROMIUM_ARGS = (
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
    "--no-first-run", "--disable-default-apps", "--disable-gpu", "--metrics-recording-only",
    "--disable-features=MediaRouter,OptimizationHints,Translate",
)  # fmt: skip

# Visible interactive elements in document order, each tagged with a data-gym-id the tools act on.
_OBSERVE_JS = """
(limit) => {
  for (const old of document.querySelectorAll('[data-gym-id]')) old.removeAttribute('data-gym-id');
  const selector = 'a[href], button, input:not([type=hidden]), textarea, select, [role=button], [onclick]';
  const items = [];
  let total = 0;
  for (const el of document.querySelectorAll(selector)) {
    const box = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    if (box.width === 0 || box.height === 0 || style.visibility === 'hidden' || style.display === 'none') continue;
    total += 1;
    if (items.length >= limit) continue;
    const tag = el.tagName.toLowerCase();
    const type = (el.getAttribute('type') || '').toLowerCase();
    let role = el.getAttribute('role');
    if (!role) {
      if (tag === 'a') role = 'link';
      else if (tag === 'button' || ['submit', 'button', 'reset'].includes(type)) role = 'button';
      else if (tag === 'select') role = 'combobox';
      else if (type === 'checkbox' || type === 'radio') role = type;
      else if (tag === 'input' || tag === 'textarea') role = 'textbox';
      else role = 'clickable';
    }
    const label = el.labels && el.labels.length ? el.labels[0].innerText : '';
    const name = (el.getAttribute('aria-label') || label || el.innerText || el.getAttribute('placeholder')
      || el.getAttribute('name') || (role === 'button' ? el.value : '') || '').trim().replace(/\\s+/g, ' ');
    const id = items.length + 1;
    el.setAttribute('data-gym-id', String(id));
    const value = role === 'textbox' || role === 'combobox' ? el.value : null;
    items.push({id, role, name: name.slice(0, 120), value});
  }
  return {title: document.title, text: document.body ? document.body.innerText : '', items, total};
}
"""


class BrowserActionError(Exception):
    """An action the page refused or could not do; its message goes back to the model as the tool's error."""


def find_chromium(configured: str | None = None) -> str | None:
    """The Chromium executable: the configured path if it is one, else Debian's `chromium` on PATH."""
    if configured:
        path = Path(configured)
        return str(path) if path.is_file() else shutil.which(configured)
    return shutil.which("chromium") or shutil.which("chromium-browser")


def playwright_missing() -> str | None:
    """Why Playwright cannot be used here, or None."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError as error:
        return f"the playwright package is not installed ({error}); pip install -r requirements.txt"
    return None


@dataclass
class Observation:
    url: str
    title: str
    text: str
    items: list[dict[str, Any]]
    total: int

    def render(self, max_text_chars: int) -> str:
        lines = [f"URL: {self.url}", f"Title: {self.title}", "Elements:"]
        for item in self.items:
            value = "" if item["value"] is None else f" (value: {item['value']!r})"
            lines.append(f"[{item['id']}] {item['role']}: {item['name']}{value}")
        if not self.items:
            lines.append("(none)")
        if self.total > len(self.items):
            lines.append(f"... {self.total - len(self.items)} more elements not shown")
        text = " ".join(self.text.split())
        if len(text) > max_text_chars:
            text = text[:max_text_chars] + " ..."
        lines.append(f"Text: {text}")
        return "\n".join(lines)


class UrlPolicy:
    """Which URLs pages may load: files under the site folder, http(s) on the allowed local hosts."""

    def __init__(self, site_dir: Path, allowed_hosts: list[str]) -> None:
        self.site_dir = site_dir.resolve()
        self.folder = self.site_dir.parent
        self.allowed_hosts = {host.lower() for host in allowed_hosts}

    def resolve(self, url: str) -> str:
        """A task or model URL as the browser needs it: one without a scheme is a path in the folder."""
        url = url.strip()
        if not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", url):
            return (self.folder / url).resolve().as_uri()
        return url

    def display(self, url: str) -> str:
        """A page's URL as the model sees it: site files relative to the folder, so recordings are portable."""
        parts = urlsplit(url)
        if parts.scheme == "file":
            path = Path(unquote(parts.path))
            if path.is_relative_to(self.folder):
                shown = path.relative_to(self.folder).as_posix()
                query = f"?{parts.query}" if parts.query else ""
                return shown + query + (f"#{parts.fragment}" if parts.fragment else "")
        return url

    def refusal(self, url: str, navigation: bool = False) -> str | None:
        """Why `url` may not be loaded, or None when it may. A navigation the model asks for may not open
        inline content (data:, blob:, javascript:): a page it wrote itself would fake any end state."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if url == "about:blank" or (scheme in ("data", "blob") and not navigation):
            return None
        if scheme == "file":
            path = Path(unquote(parts.path)).resolve()
            if path.is_relative_to(self.site_dir):
                return None
            return f"{url!r} is a file outside this environment's site folder"
        if scheme in ("http", "https", "ws", "wss"):
            if (parts.hostname or "").lower() in self.allowed_hosts:
                return None
            return f"{url!r} is not a local page (allowed hosts: {', '.join(sorted(self.allowed_hosts))})"
        return f"{url!r} has an unsupported scheme {scheme!r}"


class Browser:
    """The server's one Chromium, launched on first use and relaunched if it died."""

    def __init__(
        self, executable: str, policy: UrlPolicy, action_timeout_s: float, max_elements: int
    ) -> None:
        self.executable = executable
        self.policy = policy
        self.action_timeout_s = action_timeout_s
        self.max_elements = max_elements
        self._playwright: Any = None
        self._browser: Any = None
        self._lock = asyncio.Lock()

    async def _ensure(self) -> Any:
        async with self._lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            from playwright.async_api import async_playwright

            if self._playwright is None:
                self._playwright = await async_playwright().start()
            hosts = ", ".join(f"EXCLUDE {host}" for host in sorted(self.policy.allowed_hosts))
            self._browser = await self._playwright.chromium.launch(
                executable_path=self.executable,
                headless=True,
                args=[*CHROMIUM_ARGS, f"--host-resolver-rules=MAP * ~NOTFOUND, {hosts}"],
                timeout=max(30_000, self.action_timeout_s * 1000),
            )
            return self._browser

    async def new_page(self) -> Page:
        browser = await self._ensure()
        context = await browser.new_context(service_workers="block", accept_downloads=False)
        context.set_default_timeout(self.action_timeout_s * 1000)
        context.set_default_navigation_timeout(self.action_timeout_s * 1000)
        await context.route("**/*", self._guard_request)
        await context.route_web_socket("**/*", self._guard_websocket)
        return Page(context, await context.new_page(), self.policy, self.action_timeout_s, self.max_elements)

    async def _guard_request(self, route: Any) -> None:
        if self.policy.refusal(route.request.url) is None:
            await route.continue_()
        else:
            await route.abort("blockedbyclient")

    async def _guard_websocket(self, ws: Any) -> None:
        if self.policy.refusal(ws.url) is None:
            ws.connect_to_server()
        else:
            await ws.close(code=1008, reason="blocked: not a local address")

    async def close(self) -> None:
        if self._browser is not None:
            try:
                await self._browser.close()
            finally:
                self._browser = None
        if self._playwright is not None:
            try:
                await self._playwright.stop()
            finally:
                self._playwright = None


class Page:
    """One rollout's browser context and its page; every action is bounded by the action deadline."""

    def __init__(
        self, context: Any, page: Any, policy: UrlPolicy, action_timeout_s: float, max_elements: int
    ) -> None:
        self.context = context
        self.page = page
        self.policy = policy
        self.action_timeout_s = action_timeout_s
        self.max_elements = max_elements

    async def _bounded(self, what: str, action: Awaitable[T]) -> T:
        """Playwright's own timeouts cover waits; this also cuts off a page whose script never yields."""
        try:
            return await asyncio.wait_for(action, self.action_timeout_s + 1.0)
        except TimeoutError as error:
            raise BrowserActionError(
                f"{what} did not finish within the {self.action_timeout_s:g}s action deadline "
                "(the page is slow or unresponsive)"
            ) from error
        except BrowserActionError:
            raise
        except Exception as error:  # Playwright's errors, including its own timeouts
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            if type(error).__name__ == "TimeoutError":
                message = f"did not finish within the {self.action_timeout_s:g}s action deadline ({message})"
            raise BrowserActionError(f"{what} failed: {message}") from error

    async def goto(self, url: str) -> None:
        target = self.policy.resolve(url)
        refusal = self.policy.refusal(target, navigation=True)
        if refusal is not None:
            raise BrowserActionError(
                f"navigation refused: {refusal}; only this environment's local pages open"
            )
        await self._bounded("navigate", self.page.goto(target, wait_until="domcontentloaded"))

    def _element(self, element_id: int) -> Any:
        return self.page.locator(f'[data-gym-id="{element_id}"]')

    async def _require(self, element_id: int) -> Any:
        if await self._bounded("find element", self.page.locator("[data-gym-id]").count()) == 0:
            await self.observe()  # a page nobody observed yet: number its elements as an observation would
        locator = self._element(element_id)
        if await self._bounded("find element", locator.count()) == 0:
            raise BrowserActionError(
                f"no element {element_id} on the page; element ids come from the latest observation "
                "(call browser_observe for the current ones)"
            )
        return locator.first

    async def click(self, element_id: int) -> None:
        locator = await self._require(element_id)
        await self._bounded("click", locator.click())
        await self._settle()

    async def type(self, element_id: int, text: str) -> None:
        locator = await self._require(element_id)
        await self._bounded("type", locator.fill(text))

    async def _settle(self) -> None:
        """A click may start a navigation: wait (bounded) until the new document is parsed."""
        await self._bounded("page load", self.page.wait_for_load_state("domcontentloaded"))

    async def observe(self) -> Observation:
        found = await self._bounded("observe", self.page.evaluate(_OBSERVE_JS, self.max_elements))
        return Observation(
            url=self.policy.display(self.page.url),
            title=found["title"],
            text=found["text"],
            items=found["items"],
            total=found["total"],
        )

    def url(self) -> str:
        return self.page.url

    async def text(self) -> str:
        title = await self._bounded("read title", self.page.title())
        body = await self._bounded(
            "read text", self.page.evaluate("() => document.body ? document.body.innerText : ''")
        )
        return f"{title}\n{body}"

    async def close(self) -> None:
        await asyncio.wait_for(self.context.close(), self.action_timeout_s + 5.0)
