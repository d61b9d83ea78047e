"""Server backends against local test servers that implement the ollama and OpenAI chat APIs."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from fixgraph.llm.backends.ollama import OllamaLLM
from fixgraph.llm.backends.openai_compat import OpenAICompatibleLLM
from fixgraph.llm.base import LLMError, LLMUnavailableError
from fixgraph.llm.client import LLMClient

Route = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


class _Server:
    def __init__(self, routes: dict[tuple[str, str], Route], delay_s: float = 0.0) -> None:
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else {}
                outer.requests.append((method, self.path, body))
                time.sleep(delay_s)
                route = routes.get((method, self.path))
                status, payload = route(body) if route else (404, {"error": "no route"})
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except BrokenPipeError:
                    pass  # the client gave up (the timeout test)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _openai_routes() -> dict[tuple[str, str], Route]:
    def chat(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        content = json.dumps({"answer": 4}) if body.get("response_format") else "four"
        return 200, {
            "model": body["model"],
            "choices": [{"message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3},
        }

    return {
        ("GET", "/v1/models"): lambda _: (200, {"data": [{"id": "tiny", "object": "model", "owned_by": "me"}]}),
        ("POST", "/v1/chat/completions"): chat,
    }


def test_openai_compatible_backend_speaks_the_chat_api() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    with _Server(_openai_routes()) as server:
        backend = OpenAICompatibleLLM(model="tiny", base_url=f"{server.url}/v1", schema_mode="json_schema")
        client = LLMClient(backend)
        assert client.identity().startswith("openai:tiny@")
        result = client.complete_json("2+2?", schema, temperature=0.0, max_tokens=8, system="Be brief.")
        plain = client.complete("2+2?")
    assert result.value == {"answer": 4}
    assert (result.completions[0].input_tokens, result.completions[0].output_tokens) == (12, 3)
    assert plain.text == "four"
    _, path, body = server.requests[1]
    assert path == "/v1/chat/completions"
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }
    assert (body["temperature"], body["max_tokens"]) == (0.0, 8)


def test_openai_compatible_json_object_dialect_and_model_digest() -> None:
    with _Server(_openai_routes()) as server:
        backend = OpenAICompatibleLLM(
            model="tiny", base_url=f"{server.url}/v1", schema_mode="json_object", model_digest="abc123"
        )
        assert backend.identity() == "openai:tiny@abc123"
        backend.complete("q", schema={"type": "object"})
    assert server.requests[-1][2]["response_format"] == {"type": "json_object", "schema": {"type": "object"}}


def test_openai_compatible_names_a_model_the_server_lacks() -> None:
    with _Server(_openai_routes()) as server:
        backend = OpenAICompatibleLLM(model="huge", base_url=f"{server.url}/v1")
        with pytest.raises(LLMUnavailableError, match=r"does not serve model 'huge'; it serves: tiny"):
            backend.identity()


def test_ollama_backend_uses_native_chat_and_digest() -> None:
    routes: dict[tuple[str, str], Route] = {
        ("GET", "/api/tags"): lambda _: (200, {"models": [{"name": "qwen:1.5b", "digest": "sha256:feed"}]}),
        ("POST", "/api/chat"): lambda body: (
            200,
            {"message": {"content": '{"answer": 4}'}, "prompt_eval_count": 9, "eval_count": 5},
        ),
    }
    with _Server(routes) as server:
        backend = OllamaLLM(model="qwen:1.5b", host=server.url)
        assert backend.identity() == "ollama:qwen:1.5b@sha256:feed"
        done = backend.complete("q", schema={"type": "object"}, temperature=0.0, max_tokens=20, seed=1)
        with pytest.raises(LLMUnavailableError, match="ollama pull other"):
            OllamaLLM(model="other", host=server.url).identity()
    assert (done.text, done.input_tokens, done.output_tokens) == ('{"answer": 4}', 9, 5)
    body = server.requests[1][2]
    assert body["format"] == {"type": "object"} and body["stream"] is False
    assert body["options"] == {"temperature": 0.0, "num_predict": 20, "seed": 1}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    "make",
    [
        lambda port: OpenAICompatibleLLM(model="m", base_url=f"http://127.0.0.1:{port}/v1", timeout_s=2),
        lambda port: OllamaLLM(model="m", host=f"http://127.0.0.1:{port}", timeout_s=2),
    ],
)
def test_unreachable_server_gives_a_clear_error(make: Callable[[int], Any]) -> None:
    port = _closed_port()
    with pytest.raises(LLMUnavailableError, match=rf"cannot reach the server at http://127.0.0.1:{port}/.*running"):
        make(port).complete("q")


def test_slow_server_hits_the_timeout() -> None:
    with _Server(_openai_routes(), delay_s=1.0) as server:
        backend = OpenAICompatibleLLM(model="tiny", base_url=f"{server.url}/v1", timeout_s=0.2)
        with pytest.raises(LLMError, match=r"no answer from .* within 0.2s"):
            backend.complete("q")


@pytest.fixture
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    yield


pytestmark = pytest.mark.usefixtures("_no_proxy")
