"""The generation server's API key: `lead serve` hands it to vLLM by environment, ServerSampler sends it."""

import json
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from lead.io import sampling
from lead.io.sampling import SamplingSpec, ServerSampler, serve_command


class Stub(BaseHTTPRequestHandler):
    """vLLM's two routes that ServerSampler uses, refusing a request without ``Bearer s3cret`` as vLLM does."""

    seen: ClassVar[list[tuple[str, str | None]]] = []

    def _reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization")
        Stub.seen.append((self.path, header))
        if header != "Bearer s3cret":
            self._reply(401, {"error": "Unauthorized"})
            return False
        return True

    def do_GET(self):
        if self._authorized():
            self._reply(200, {"data": [{"id": "m"}]})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        if self._authorized():
            choice = {"index": 0, "message": {"content": "4"}, "token_ids": [1, 2], "finish_reason": "stop"}
            self._reply(200, {"choices": [choice]})

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Stub.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_the_key_from_the_environment_is_sent_on_every_request(server, monkeypatch):
    monkeypatch.setenv("LEAD_SERVE_API_KEY", "s3cret")
    out = ServerSampler(server, "m").sample(["2+2?"], SamplingSpec(max_new_tokens=4))
    assert out[0][0].text == "4" and out[0][0].num_tokens == 2
    assert [path for path, _ in Stub.seen] == ["/v1/models", "/v1/chat/completions"]
    assert all(header == "Bearer s3cret" for _, header in Stub.seen)


def test_without_the_key_the_server_is_refused(server, monkeypatch):
    monkeypatch.delenv("LEAD_SERVE_API_KEY", raising=False)
    with pytest.raises(ConnectionError, match="401"):
        ServerSampler(server, "m")
    assert ServerSampler(server, "m", api_key="s3cret").model == "m"  # an explicit key needs no environment


def test_serve_passes_the_key_by_environment_not_on_the_command_line(monkeypatch):
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: False)
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.setenv(sampling.API_KEY_ENV, "s3cret")
    argv, env = serve_command("/m", "name", dtype="float32", host="0.0.0.0", port=8000)
    assert env["VLLM_API_KEY"] == "s3cret" and "s3cret" not in " ".join(argv)
    monkeypatch.delenv(sampling.API_KEY_ENV)
    assert "VLLM_API_KEY" not in serve_command("/m", "name", dtype="float32", host="h", port=1)[1]


@pytest.mark.parametrize("key", [" ", "", "s3cret", " " * 20 + "abc"])
def test_a_blank_or_guessable_key_is_refused_on_a_host_others_reach(monkeypatch, key):
    monkeypatch.setenv(sampling.API_KEY_ENV, key)
    refusal, warning = sampling.exposure_refusal("0.0.0.0", insecure=True)  # --insecure is for no key at all
    assert refusal is not None and "at least 16" in refusal and warning is None
    assert sampling.exposure_refusal("127.0.0.1") == (None, None)  # loopback: only this machine reaches it
    monkeypatch.setenv(sampling.API_KEY_ENV, "k" * 16)
    assert sampling.exposure_refusal("0.0.0.0") == (None, None)
