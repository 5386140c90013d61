"""One headless Chromium per process, shared by every MiniWoB session as isolated contexts.

Why a thread of its own: Playwright's sync API binds its objects to the thread that made them, but
the server runs each blocking session on a thread of its own. So one daemon thread runs an asyncio
loop with Playwright's async API, and every session submits coroutines to it with a deadline
(``BrowserHost.call``). Sessions then run concurrently inside one browser.

Lifetime is counted: the first ``acquire()`` starts the thread, Playwright's driver and Chromium;
the last ``release()`` stops all three, so no browser process outlives the sessions that used it.
A Chromium that crashed (or was killed) is noticed by ``new_context`` and relaunched. A call that
overruns its deadline fails with ``BrowserFailure``; if the browser then does not answer a trivial
DevTools call either, it is hung and is killed (it would never answer again): the sessions on it
fail, and the next context gets a fresh browser. A slow page alone fails only its own session.

Only the system browser is used (``/usr/bin/chromium`` or ``$OPENENV_CHROMIUM``); nothing is
downloaded; its sandbox is used except as root (where Chromium refuses it) or where the kernel
cannot provide it. Contexts are offline and every request other than ``file://`` is refused, so
task pages never reach a network.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import threading
import uuid
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "CHROMIUM_ARGS",
    "BrowserFailure",
    "BrowserHost",
    "BrowserMissing",
    "chromium_path",
    "descendants",
    "host",
]

T = TypeVar("T")

CHROMIUM_ARGS = ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 # Nothing but file:// pages: a proxy that cannot be reached blocks every other fetch.
                 "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
#: Seconds to launch Chromium (and Playwright's driver) before giving up.
LAUNCH_TIMEOUT_S = 30.0
#: Seconds a browser gets to answer a trivial DevTools call after a session's call overran.
PROBE_TIMEOUT_S = 5.0


class BrowserMissing(RuntimeError):
    """No usable Chromium (or no Playwright): says what to install."""


class BrowserFailure(RuntimeError):
    """The browser of a session crashed or stopped answering: that session's page is gone."""


def chromium_path() -> str | None:
    """Debian's Chromium (``/usr/bin/chromium``) or ``$OPENENV_CHROMIUM``; None when absent."""
    path = os.environ.get("OPENENV_CHROMIUM") or "/usr/bin/chromium"
    return path if os.path.exists(path) and os.access(path, os.X_OK) else None


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, grandchildren, ...), read from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone between listing and reading
            continue
        # The command name (field 2) may hold spaces and parentheses: the ppid follows the last ')'.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


class BrowserHost:
    """The process's Chromium and the event-loop thread that drives it (reference counted)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._playwright: Any = None
        self._browser: Any = None
        self._launching: asyncio.Lock | None = None
        #: Set when this host killed its Chromium: Playwright notices the death a moment later, and
        #: until then the browser still looks connected, so the next context must not be asked of it.
        self._killed = False
        #: A switch Chromium ignores, on the command line of this host's browsers only: it tells
        #: them from any other Chromium this process started (a test's, the web page's), so that
        #: ``browser_pid`` and the kill of a hung browser never pick someone else's.
        self._mark = f"--openenv-miniwob-host={uuid.uuid4().hex}"

    # -- lifetime ---------------------------------------------------------------------------------

    def acquire(self) -> None:
        """Count one more user; the first starts the loop thread (the browser starts on first use)."""
        with self._lock:
            self._users += 1
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="miniwob-browser", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread

    def release(self) -> None:
        """Count one user less; the last one closes Chromium, Playwright's driver and the thread."""
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users or self._loop is None:
                return
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            self._launching = None
        try:
            asyncio.run_coroutine_threadsafe(self._stop(), loop).result(LAUNCH_TIMEOUT_S)
        except Exception:  # a wedged driver: kill what is left below us rather than leak it
            self._kill_browser()
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(LAUNCH_TIMEOUT_S)
        loop.close()

    @property
    def users(self) -> int:
        return self._users

    # -- calls ------------------------------------------------------------------------------------

    def call(self, make: Callable[[], Awaitable[T]], timeout_s: float) -> T:
        """Run ``make()`` on the browser's loop; past ``timeout_s`` the browser is killed and
        ``BrowserFailure`` raised (a call into a hung browser would never return)."""
        loop = self._loop
        if loop is None:
            raise BrowserFailure("the browser host is not running (acquire() it first)")

        async def wrapped() -> T:
            return await make()

        future = asyncio.run_coroutine_threadsafe(wrapped(), loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
        # Overran: a slow or hung page is that session's problem; a browser that does not answer a
        # trivial DevTools call is hung for everyone and is killed (it would never answer again).
        probe = asyncio.run_coroutine_threadsafe(self._probe(), loop)
        try:
            probe.result(PROBE_TIMEOUT_S)
        except Exception:
            probe.cancel()
            pid = self.browser_pid()
            self._kill_browser()
            raise BrowserFailure(
                f"the browser did not answer within {timeout_s:g} s (Chromium pid {pid} killed); this "
                "session's page is gone: reset() starts over in a fresh browser") from None
        raise BrowserFailure(f"this session's page did not answer within {timeout_s:g} s (the browser "
                             "itself answers; other sessions go on)")

    async def new_context(self, **options: Any) -> Any:
        """A fresh isolated context (its own cookies, storage, cache), offline except ``file://``;
        launches (or relaunches, after a crash) Chromium as needed."""
        if self._launching is None:  # made on the loop thread: an asyncio lock belongs to one loop
            self._launching = asyncio.Lock()
        from playwright.async_api import Error as PlaywrightError

        for attempt in (1, 2):
            async with self._launching:  # sessions starting together must share one launch, not race
                if self._killed or self._browser is None or not self._browser.is_connected():
                    self._killed = False
                    await self._launch()
                browser = self._browser
            try:
                context = await browser.new_context(**options)
            except PlaywrightError as exc:
                # The browser died between the check and the call (killed as hung, or crashed) and
                # Playwright had not noticed yet: one relaunch, then the error is the caller's.
                if attempt == 2 or "closed" not in str(exc).lower():
                    raise
                async with self._launching:
                    if self._browser is browser:
                        self._killed = True
                continue
            await context.route("**/*", _only_files)
            return context
        raise AssertionError("unreachable")  # pragma: no cover

    def browser_pid(self) -> int | None:
        """The PID of this host's Chromium main process (a descendant of this process launched
        with this host's mark), if one runs."""
        for pid in descendants(os.getpid()):
            args = _cmdline(pid)
            if self._mark in args and not any(a.startswith("--type=") for a in args):
                return pid
        return None

    def is_alive(self) -> bool:
        return not self._killed and self._browser is not None and self._browser.is_connected()

    # -- internals (on the loop thread) -------------------------------------------------------------

    async def _launch(self) -> None:
        path = chromium_path()
        if path is None:
            raise BrowserMissing("No Chromium at /usr/bin/chromium: install Debian's `chromium` package "
                                 "(bash .ci/browser-setup.sh) or set OPENENV_CHROMIUM to a Chromium binary.")
        try:
            from playwright.async_api import async_playwright
        except ImportError as exc:  # pragma: no cover - a dependency of this package
            raise BrowserMissing(f"playwright is not importable ({exc}): pip install playwright") from None
        if self._browser is not None:  # a dead browser: drop it before launching anew (bounded)
            try:
                await asyncio.wait_for(self._browser.close(), 5.0)
            except Exception:
                pass
        if self._playwright is None:
            self._playwright = await async_playwright().start()
        options = {"executable_path": path, "headless": True, "args": [*CHROMIUM_ARGS, self._mark],
                   "timeout": LAUNCH_TIMEOUT_S * 1000}
        # Playwright adds --no-sandbox unless chromium_sandbox=True. Chromium refuses its sandbox as
        # root, so root goes without; any other user gets the sandbox, and goes without only where
        # the kernel cannot give it one (no user namespaces in a container), with a warning.
        if os.geteuid() != 0:
            try:
                self._browser = await self._playwright.chromium.launch(chromium_sandbox=True, **options)
                return
            except Exception as exc:
                warnings.warn(f"Chromium's sandbox is unavailable here ({str(exc).splitlines()[0]}); "
                              "running MiniWoB pages without it", RuntimeWarning, stacklevel=1)
        self._browser = await self._playwright.chromium.launch(chromium_sandbox=False, **options)

    async def _probe(self) -> None:
        if self._browser is None or not self._browser.is_connected():
            raise BrowserFailure("the browser is gone")
        session = await self._browser.new_browser_cdp_session()
        try:
            await session.send("Browser.getVersion")
        finally:
            await session.detach()

    async def _stop(self) -> None:
        try:
            if self._browser is not None:
                await self._browser.close()
        finally:
            self._browser = None
            if self._playwright is not None:
                await self._playwright.stop()
                self._playwright = None

    def _kill_browser(self) -> None:
        self._killed = True
        pid = self.browser_pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


async def _only_files(route: Any) -> None:
    # Task pages are local files; anything else (a stray http(s) fetch) is refused, not fetched.
    if route.request.url.startswith(("file://", "data:", "about:")):
        await route.continue_()
    else:
        await route.abort("blockedbyclient")


_HOST = BrowserHost()


def host() -> BrowserHost:
    """The process's browser host (one Chromium per process, shared by its sessions)."""
    return _HOST
