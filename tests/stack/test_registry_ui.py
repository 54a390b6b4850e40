"""Registry review in a real browser: headless Chromium (Debian's ``chromium``) against ``mlflow server`` on a
temporary sqlite store holding a champion (v1) and a challenger (v2) that ``register`` made.

What a reviewer sees and clicks is checked on the rendered DOM, not on the markdown: the description renders
as HTML (its comparison table's figures are table cells), ``@champion`` is no GitHub link, every link of the
description is on the page with the target the description gives, and each one resolves — the server answers
it (HTTP 200) and what it names exists: a run with the registered metrics, a plot file, the champion's version.
The run pages, a plot's viewer page and MLflow's version Compare are rendered too, and show the figures and
the params that differ. One screenshot of the version page is kept in ``docs/registry-review.png``
(``LEAD_UPDATE_SCREENSHOT=1`` rewrites it).

Chromium comes from ``infra/stack.py install`` (apt, what ``.ci/run`` runs); without it the test skips, except
under ``CI`` where it fails."""

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient

from lead.config import Params
from lead.evaluation import ACCURACY_PLOT
from lead.stages import register
from tests.conftest import ROOT
from tests.stack.browser import Browser
from tests.stages import test_register
from tests.stages.test_register import evaluated

pytestmark = pytest.mark.slow  # 2 tiny models registered, mlflow server, 6 pages: ~2.5 min on 2 busy cores

params = test_register.params  # the register tests' fixture: a tiny trained model and its train run
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT = ROOT / "docs" / "registry-review.png"
SAMPLES_SCREENSHOT = ROOT / "docs" / "evaluate-samples-table.png"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")  # a markdown link of the description (no image)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, auth: tuple[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if auth:  # HTTP basic auth, as the stack's MLflow server wants it
        request.add_header("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def api(base: str, path: str, auth: tuple[str, str] | None = None, **query: str) -> dict:
    status, body = get(f"{base}/api/2.0/mlflow/{path}?{urllib.parse.urlencode(query)}", auth)
    assert status == 200, (path, query, status, body[:300])
    return json.loads(body)


@contextlib.contextmanager
def server_for(tmp_path: Path) -> Iterator[Callable[[], str]]:
    """Start ``mlflow server`` (the UI and the REST API) on the register tests' sqlite store, on a free port;
    yields a function that waits until it is healthy and returns its URL (it starts while the test registers)."""
    port = free_port()
    store = (
        f"sqlite:///{tmp_path / 'mlflow.db'}"  # created and migrated by the fixture, before the server starts
    )
    log_path = tmp_path / "mlflow-server.log"
    command = [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri", store]
    command += ["--default-artifact-root", (tmp_path / "mlartifacts").as_uri()]
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    base = f"http://127.0.0.1:{port}"

    def ready() -> str:
        deadline = time.monotonic() + 180
        while get_health(base) != 200:
            assert process.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "mlflow server not healthy after 180 s"
            time.sleep(0.5)
        return base

    with log_path.open("w") as log:
        process = subprocess.Popen(
            command, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield ready
        finally:
            os.killpg(process.pid, signal.SIGTERM)  # the server and its workers: the group started here
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def get_health(base: str) -> int:
    try:
        return get(f"{base}/health")[0]
    except OSError:
        return 0


def render(url: str, out: Path, *expect: str, screenshot: Path | None = None) -> str:
    """The DOM of ``url`` once all of ``expect`` is in it (kept in ``out`` for a look when the test fails), in a
    headless Chromium of its own (:class:`tests.stack.browser.Browser`); ``screenshot``: also a PNG of it."""
    with Browser(CHROMIUM, out.parent) as browser:
        dom = browser.open(url, *expect)
        if screenshot:
            browser.screenshot(screenshot)
    out.write_text(dom)
    return dom


class Page(HTMLParser):
    """The rendered page: every link, the links and table cells of the version's description, its text."""

    DESCRIPTION = "note-editor-preview-content"  # MLflow's rendered-markdown container (data-testid)

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.links: list[tuple[str | None, str]] = []  # (href, text) of every <a>
        self.described: list[tuple[str | None, str]] = []  # those inside the description
        self.cells: list[str] = []  # <td> texts inside the description
        self.text: list[str] = []  # the description's text
        self.images: list[dict[str, str | None]] = []
        self._depth = 0  # open <div>s since the description's opened (0: outside)
        self._anchor: list[str] | None = None
        self._href: str | None = None
        self._cell: list[str] | None = None
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and (self._depth or a.get("data-testid") == self.DESCRIPTION):
            self._depth += 1
        if tag == "a":
            self._anchor, self._href = [], a.get("href")
        if tag == "td" and self._depth:
            self._cell = []
        if tag == "img":
            self.images.append(a)

    def handle_endtag(self, tag):
        if tag == "div" and self._depth:
            self._depth -= 1
        if tag == "a" and self._anchor is not None:
            link = (self._href, "".join(self._anchor).strip())
            self.links.append(link)
            if self._depth:
                self.described.append(link)
            self._anchor = None
        if tag == "td" and self._cell is not None:
            self.cells.append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._anchor is not None:
            self._anchor.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._depth:
            self.text.append(data)


def dom_text(dom: str) -> str:
    return re.sub(
        r"\s+", " ", re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S))
    )


def follow(base: str, page_url: str, href: str, auth: tuple[str, str] | None = None) -> str:
    """Follow one link of the description as the browser would (relative to the version page) and check what it
    names exists; returns the kind of target (run, artifact, version, file)."""
    target = urllib.parse.urljoin(page_url, href)
    status, body = get(target, auth)
    assert status == 200, (href, target, status)
    parts = urllib.parse.urlsplit(target)
    if not parts.fragment:  # a file the server serves
        assert parts.path.endswith("/get-artifact") and body.startswith(PNG_MAGIC), (href, body[:100])
        return "file"
    route = urllib.parse.urlsplit(parts.fragment)
    assert dict(urllib.parse.parse_qsl(route.query)) == {"workflowType": "machine_learning"}, href
    if m := re.fullmatch(r"/experiments/([^/]+)/runs/([0-9a-f]+)/artifacts/(.+)", route.path):
        run = api(base, "runs/get", auth, run_id=m[2])["run"]
        assert run["info"]["experiment_id"] == m[1], href
        status, body = get(f"{base}/get-artifact?path={m[3]}&run_uuid={m[2]}", auth)
        assert status == 200 and body.startswith(PNG_MAGIC), (href, status)
        return "artifact"
    if m := re.fullmatch(r"/experiments/([^/]+)/runs/([0-9a-f]+)", route.path):
        run = api(base, "runs/get", auth, run_id=m[2])["run"]
        assert run["info"]["experiment_id"] == m[1], href
        assert run["data"].get("metrics") or run["data"].get("params"), (href, "an empty run")
        return "run"
    if m := re.fullmatch(r"/models/([^/]+)/versions/([0-9]+)", route.path):
        name = urllib.parse.unquote(m[1])
        api(base, "model-versions/get", auth, name=name, version=m[2])
        return "version"
    raise AssertionError(f"{href}: not a route of MLflow's UI this test knows")


def outcome(base: str, page_url: str, href: str, auth: tuple[str, str] | None = None) -> str:
    """:func:`follow`'s kind of target, or why the link is dead (all links are reported, not the first)."""
    try:
        return follow(base, page_url, href, auth)
    except (AssertionError, OSError, ValueError) as exc:
        return f"dead: {exc!r}"


@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="chromium is not installed (`python infra/stack.py install`, or `apt-get install chromium`)",
)
def test_a_reviewer_can_click_through_the_challengers_version_page(params: Params, tmp_path):
    assert CHROMIUM, "chromium is not installed: `.venv/bin/python infra/stack.py install` installs it"
    with server_for(tmp_path) as ready:
        evaluated(params, 0.30, 60.0)
        register.run(params)  # v1: @champion
        evaluated(params, 0.25, 50.0, backend="vllm", answers="second")
        register.run(params)  # v2: @challenger (less accurate), evaluated on another backend
        mlflow.set_tracking_uri(params.tracking.uri)
        client = MlflowClient()
        name = params.register_.model_name
        challenger = client.get_model_version_by_alias(name, "challenger")
        champion = client.get_model_version_by_alias(name, "champion")
        described = LINK.findall(challenger.description)
        # evaluate run, train run, champion's version; two plots, each a viewer page and the file
        assert len(described) == 7, challenger.description

        base = ready()
        page_url = f"{base}/#/models/{name}/versions/{challenger.version}?workflowType=machine_learning"
        source_run = (
            f"#/experiments/{client.get_run(challenger.run_id).info.experiment_id}/runs/{challenger.run_id}"
        )
        runs = {label: href for label, href in described if "/runs/" in href and "/artifacts/" not in href}
        compare = (
            f"{base}/#/compare-model-versions?name={json.dumps(name)}"
            f"&runs={json.dumps({str(v.version): v.run_id for v in (champion, challenger)})}"
        )
        version_page = ("benchmark", f'href="{source_run}"')  # the description, and the Source Run link
        run_page = ("proxy.pass_at_1", "proxy.len_avg")  # the metrics table
        pages = {  # what each page must show once rendered: everything its checks below read
            "version": (page_url, version_page),
            "source": (
                f"{base}/{source_run}?workflowType=machine_learning",
                (*run_page, "evaluate.backend", "train.max_steps"),
            ),
            "evaluate": (urllib.parse.urljoin(page_url, runs["evaluate run"]), run_page),
            "plot": (
                urllib.parse.urljoin(page_url, dict(described)["accuracy_vs_length"]),
                (f'alt="evaluate/{ACCURACY_PLOT}"',),
            ),
            # both versions' runs: each comes in its own fetch (beside two busy loops, the page once held only
            # the challenger's, the champion's column still "Invalid Run")
            "compare": (compare, ("evaluate.backend", "transformers", "vllm", "proxy.pass_at_1", "0.3")),
        }
        shots = {"version": tmp_path / "version.png"}  # the version page, as docs/ shows it
        with ThreadPoolExecutor(3) as pool:  # Chromium mostly waits on the server: three at a time
            rendered = {
                k: pool.submit(render, url, tmp_path / f"{k}.html", *want, screenshot=shots.get(k))
                for k, (url, want) in pages.items()
            }
            doms = {k: future.result() for k, future in rendered.items()}
        # The evaluate run's completions, as the table its page shows (mlflow.log_table).
        table_url = urllib.parse.urljoin(page_url, runs["evaluate run"]).replace(
            "?workflowType", f"/artifacts/{urllib.parse.quote('evaluate/samples.json')}?workflowType"
        )
        samples_dom = render(
            table_url, tmp_path / "samples.html", "completion", screenshot=tmp_path / "samples.png"
        )
        followed = {href: outcome(base, page_url, href) for _, href in described}

    # The description rendered as HTML: the comparison figures are table cells, not markdown text.
    page = Page(doms["version"])
    text = " ".join(page.text)
    assert page.cells[:7] == ["proxy", "0.250", "0.300", "-0.050", "50.0", "60.0", "-10.0"], page.cells
    # ... padded, so that headers and figures do not run together.
    assert "\xa0\xa0Pass@1\xa0\xa0" in doms["version"].replace("&nbsp;", "\xa0")
    # What a reviewer reads: the problems newly failed and solved with both answers, as table cells; the plot
    # itself, as an image of the page.
    words = " ".join(text.split())
    assert "Newly failed against v1:" in words and "Newly solved against v1:" in words, words[:3000]
    # (with the problem's statement, its * shown as written: the description escapes Markdown)
    assert page.cells[7:11] == ["proxy p1: What is 6*p1?", "7", "6 (0/2)", "7 (2/2)"], page.cells
    # both versions' curves, drawn by register (the UI's sanitizer keeps an image's src, not its alt)
    assert any("review%2Faccuracy_vs_length.png" in (i.get("src") or "") for i in page.images), page.images
    assert "| proxy |" not in text and "**" not in text, text[:500]
    # @champion is text, not a link to github.com/champion (GitHub-flavored mentions); no link is "null".
    assert not [h for h, _ in page.links if h == "null" or "github.com/champion" in (h or "")]
    assert "against the current @champion (version 1)" in text and "\\@" not in text
    # Every link of the description is on the page, with its target; none is dead, empty or a GitHub mention.
    assert {label: href for href, label in page.described} == dict(described)
    assert not [h for h, _ in page.described if not h or h == "null" or "github.com" in h]
    # The version's Source Run is the register run, and it shows the registered figures and params.
    assert (source_run, "register") in page.links
    for key in ("source", "evaluate"):
        shown = dom_text(doms[key])
        assert "proxy.pass_at_1 0.25" in shown and "proxy.len_avg 50" in shown, (key, shown[:2000])
    shown = dom_text(doms["source"])
    assert "evaluate.backend vllm" in shown and "train.max_steps 100" in shown, shown[:2000]
    # The plot's viewer page shows the image; Compare shows the params that differ and both versions' metrics.
    assert any(i.get("alt") == f"evaluate/{ACCURACY_PLOT}" for i in Page(doms["plot"]).images)
    shown = dom_text(doms["compare"])
    assert 'evaluate.backend "transformers" "vllm"' in shown and "proxy.pass_at_1 0.3 0.25" in shown, shown[
        :3000
    ]

    # Every link of the description resolves to what it names (HTTP 200, and the thing exists).
    assert sorted(followed.values()) == ["artifact", "artifact", "file", "file", "run", "run", "version"], (
        followed
    )

    # The samples table: every completion with its answer and verdict, on the evaluate run's page.
    shown = dom_text(samples_dom)
    assert "problem_id" in shown and "completion" in shown and "The answer is" in shown, shown[:2000]

    image = (tmp_path / "version.png").read_bytes()
    assert image.startswith(PNG_MAGIC) and len(image) > 20_000
    if os.environ.get("LEAD_UPDATE_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(exist_ok=True)
        SCREENSHOT.write_bytes(image)
        SAMPLES_SCREENSHOT.write_bytes((tmp_path / "samples.png").read_bytes())
