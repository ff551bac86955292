"""Headless Chromium over the DevTools protocol: open a report, record its requests, screenshot it.

Chromium is driven through ``--remote-debugging-pipe`` (JSON messages on file descriptors 3
and 4, NUL-terminated), so no port is opened and nothing beyond the standard library is needed.
The network check is real: the ``Network`` domain is enabled *before* the page is navigated, and
every ``Network.requestWillBeSent`` URL is recorded (the page itself, every sub-resource, every
``fetch``, including requests the page's Content-Security-Policy then blocks). A self-contained
report requests its own ``file://`` URL and ``data:`` URLs at most.

Debian's ``chromium`` package is the browser (``scripts/install_chromium.sh`` installs it);
:func:`find_chromium` returns None where there is none, and callers skip with that reason.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rosetta.errors import RosettaError

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
)
LAPTOP = (1366, 900)  # CSS pixels of the viewport a laptop screen shows


def find_chromium() -> str | None:
    """Path of a Chromium binary: ``$ROSETTA_CHROMIUM``, else ``chromium`` on PATH, else None."""
    env = os.environ.get("ROSETTA_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageVisit:
    """What opening a page showed: every requested URL, the result of the probe script, the
    screenshot (PNG bytes) and console errors."""

    requests: list[str] = field(default_factory=list)
    probe: object = None
    screenshot: bytes = b""
    console_errors: list[str] = field(default_factory=list)

    def external_requests(self, page_url: str) -> list[str]:
        """Requests other than the page itself and inline ``data:`` URLs."""
        return [u for u in self.requests if u != page_url and not u.startswith("data:")]


class Browser:
    """One headless Chromium process with a DevTools session on one page (a context manager)."""

    def __init__(self, binary: str | None = None, timeout_s: float = 60.0):
        self.binary = binary or find_chromium()
        if not self.binary:
            raise RosettaError("no chromium binary found (bash scripts/install_chromium.sh)")
        self.timeout_s = timeout_s
        self._id = 0
        self._buf = b""
        self.events: list[dict] = []

    def __enter__(self) -> Browser:
        self._profile = tempfile.TemporaryDirectory(prefix="rosetta-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        keep = {to_child_r: 3, from_child_w: 4}

        def _fds() -> None:  # in the child: the pipe ends become fds 3 (read) and 4 (write)
            moved = {fcntl.fcntl(src, fcntl.F_DUPFD_CLOEXEC, 10): dst for src, dst in keep.items()}
            for src, dst in moved.items():  # above 10 first, so neither dup2 clobbers the other
                os.dup2(src, dst, inheritable=True)

        args = [self.binary, *FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_fds,  # noqa: PLW1509 - single-threaded caller; fds must be 3 and 4
            close_fds=False,  # Python's own fds are non-inheritable: only 0-4 reach chromium
        )
        os.close(to_child_r)
        os.close(from_child_w)
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}
        )["sessionId"]
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.call("Browser.close", timeout_s=5)
        except Exception:  # noqa: BLE001 - closing anyway below
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    # -- the protocol ---------------------------------------------------------------------------
    def call(
        self,
        method: str,
        params: dict | None = None,
        *,
        page: bool = False,
        timeout_s: float | None = None,
    ) -> dict:
        """Send one command (to the page session if ``page``) and wait for its result."""
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if page:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RosettaError(f"chromium: {method} failed: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, timeout_s: float | None = None) -> dict:
        """The first (already received or next) event named ``method``."""
        for i, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            ev = self._read(deadline)
            if ev.get("method") == method:
                return ev
            self.events.append(ev)

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RosettaError("chromium: no answer from the DevTools pipe in time")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise RosettaError("chromium exited (DevTools pipe closed)")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    # -- what callers use -----------------------------------------------------------------------
    def visit(
        self,
        url: str,
        *,
        probe_js: str | None = None,
        size: tuple[int, int] = LAPTOP,
        full_page: bool = False,
        settle_s: float = 0.3,
        section: str | None = None,
    ) -> PageVisit:
        """Open ``url`` with network recording on; run ``probe_js``; take a PNG screenshot (of
        the element with id ``section`` only, its top ``size[1]`` pixels, when given)."""
        self.call("Network.enable", page=True)
        self.call("Page.enable", page=True)
        self.call("Runtime.enable", page=True)
        w, h = size
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False},
            page=True,
        )
        self.call("Emulation.setScrollbarsHidden", {"hidden": True}, page=True)
        self.events.clear()
        self.call("Page.navigate", {"url": url}, page=True)
        self.wait_event("Page.loadEventFired")
        time.sleep(settle_s)  # let late requests (if any) show up before counting them
        visit = PageVisit()
        if probe_js:
            res = self.call(
                "Runtime.evaluate", {"expression": probe_js, "returnByValue": True}, page=True
            )
            if "exceptionDetails" in res:
                raise RosettaError(f"probe script failed: {res['exceptionDetails']}")
            visit.probe = res["result"].get("value")
        shot = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            m = self.call("Page.getLayoutMetrics", page=True)["cssContentSize"]
            shot["clip"] = {"x": 0, "y": 0, "width": w, "height": m["height"], "scale": 1}
        if section:
            box = self._element_box(section)
            box["height"] = min(box["height"], h)  # its top, at most one window's height
            shot.update(captureBeyondViewport=True, clip=box)
        visit.screenshot = base64.b64decode(
            self.call("Page.captureScreenshot", shot, page=True)["data"]
        )
        self.call("Runtime.evaluate", {"expression": "1"}, page=True)  # flush pending events
        for ev in self.events:
            p = ev.get("params", {})
            if ev.get("method") == "Network.requestWillBeSent":
                visit.requests.append(p["request"]["url"])
            elif ev.get("method") == "Network.webSocketCreated":
                visit.requests.append(p["url"])
            elif ev.get("method") == "Runtime.exceptionThrown":
                visit.console_errors.append(str(p.get("exceptionDetails", {}).get("text")))
            elif ev.get("method") == "Runtime.consoleAPICalled" and p.get("type") == "error":
                visit.console_errors.append(json.dumps(p.get("args"))[:300])
        return visit

    def _element_box(self, element_id: str) -> dict:
        """The page-absolute box of the element ``element_id`` (a screenshot clip)."""
        js = (
            f"(() => {{ const e = document.getElementById({json.dumps(element_id)}); if (!e) "
            "return null; const r = e.getBoundingClientRect(); return {x: r.left + scrollX, "
            "y: r.top + scrollY, width: r.width, height: r.height}; })()"
        )
        res = self.call("Runtime.evaluate", {"expression": js, "returnByValue": True}, page=True)
        box = res.get("result", {}).get("value")
        if not box:
            raise RosettaError(f"the page has no section with id {element_id!r}")
        return {**box, "scale": 1}


def screenshot(
    html: Path,
    png: Path,
    *,
    full_page: bool = False,
    size: tuple[int, int] = LAPTOP,
    section: str | None = None,
) -> PageVisit:
    """Open ``html`` in headless Chromium and save its screenshot (of the element with id
    ``section`` only, when given) to ``png``."""
    with Browser() as b:
        url = Path(html).resolve().as_uri()
        visit = b.visit(url, size=size, full_page=full_page, section=section)
    png.parent.mkdir(parents=True, exist_ok=True)
    png.write_bytes(visit.screenshot)
    return visit
