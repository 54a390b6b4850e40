"""Headless Chromium driven through the DevTools protocol, for pages behind HTTP basic auth.

``chromium --dump-dom URL`` cannot open a page behind basic auth: credentials in the URL (``user:pw@host``)
reach the first request, but the page's own ``fetch`` calls then fail ("Request cannot be constructed from a
URL that includes credentials"), so a single-page app such as MLflow's UI renders empty. A person's browser
shows a login prompt on the server's ``401`` + ``WWW-Authenticate`` and sends the answer with every later
request; :class:`Browser` does the same through the protocol's ``Fetch`` domain: every auth challenge of the
page is answered with the given credentials (or cancelled, as a person who closes the prompt would), every
other request goes on untouched. One page per browser; the DOM, its text and a screenshot come back. The
registry-review tests use it with a login (the stack's MLflow) and without (a server with no auth).

Only the standard library and ``websockets`` (a dependency of Prefect's client, pinned in the lock)."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


class Browser:
    """One headless Chromium with one page; ``credentials`` (user, password) answer basic-auth prompts, None
    cancels them."""

    def __init__(self, chromium: str, folder: Path, credentials: tuple[str, str] | None = None) -> None:
        self.credentials = credentials
        self.challenges = 0  # auth prompts the page met
        profile = tempfile.mkdtemp(prefix="browser.", suffix=".profile", dir=folder)
        self.log = Path(profile).with_suffix(".log")
        self.process = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",  # as root (CI), Chromium's sandbox refuses to start
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",  # a free port, printed on stderr
                "--window-size=1400,1500",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("w"),  # a file, not a pipe nobody reads once the page is open
        )
        try:
            self._connect()
        except BaseException:
            self.close()
            raise

    def _connect(self) -> None:
        deadline = time.monotonic() + 60
        while not (m := LISTENING.search(self.log.read_text())):
            assert self.process.poll() is None, f"chromium exited: {self.log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "chromium printed no DevTools address within 60 s"
            time.sleep(0.1)
        port = m[1].split("/")[2].rsplit(":", 1)[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as response:
            (page,) = [t for t in json.load(response) if t["type"] == "page"]
        self.socket = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        self.next_id = 0
        self.call("Fetch.enable", handleAuthRequests=True)
        self.call("Page.enable")

    def _send(self, method: str, **params: Any) -> int:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        return self.next_id

    def _event(self, message: dict) -> None:
        """Answer what the page waits on: a paused request goes on, an auth prompt is answered."""
        params = message.get("params", {})
        if message.get("method") == "Fetch.requestPaused":
            self._send("Fetch.continueRequest", requestId=params["requestId"])
        elif message.get("method") == "Fetch.authRequired":
            self.challenges += 1
            if self.credentials:
                user, password = self.credentials
                answer = {"response": "ProvideCredentials", "username": user, "password": password}
            else:
                answer = {"response": "CancelAuth"}
            self._send("Fetch.continueWithAuth", requestId=params["requestId"], authChallengeResponse=answer)

    def call(self, method: str, timeout: float = 60, **params: Any) -> dict:
        """Send one command and return its result, answering the page's events meanwhile."""
        wanted = self._send(method, **params)
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.socket.recv(timeout=max(deadline - time.monotonic(), 0.01)))
            if message.get("id") == wanted:
                assert "error" not in message, (method, message["error"])
                return message.get("result", {})
            self._event(message)

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def open(self, url: str, *expect: str, timeout: float = 90, settle: float = 1.0) -> str:
        """Navigate to ``url``; the DOM once it holds every string of ``expect`` and has not changed for
        ``settle`` seconds. A single-page app renders in parts as its fetches come back (the version page's
        description before its Source Run link), so the caller names what each of its checks reads: waiting for
        the DOM to go quiet alone misses a fetch slower than ``settle`` on a loaded machine. Fails with the
        page's text when something never shows."""
        assert expect, "name what the page must show"
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        dom, since = "", time.monotonic()
        # each poll is a call, which also answers the page's queued events (paused requests, auth prompts)
        while True:
            now, previous = time.monotonic(), dom
            dom = self.evaluate("document.documentElement.outerHTML") or ""
            missing = [e for e in expect if e not in dom]
            if dom != previous:
                since = now
            elif not missing and now - since >= settle:
                return dom
            if now > deadline:
                assert not missing, (
                    f"{url}: {missing!r} not shown within {timeout:.0f} s; the page says:\n{self.text()}"
                )
                return dom  # all shown, still changing (a spinner, a clock): as it is now
            time.sleep(0.25)

    def text(self) -> str:
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def screenshot(self, out: Path) -> None:
        out.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        if getattr(self, "socket", None) is not None:
            self.socket.close()
        self.process.kill()
        self.process.wait()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
