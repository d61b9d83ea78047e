"""Streaming: the live view of a reply, the client's stream (cache, usage, early close), and the
server backends' streaming dialects against local servers (SSE for OpenAI, NDJSON for ollama)."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixgraph.answer.parsing import ReplyReader, parse_reply
from fixgraph.llm.backends.ollama import OllamaLLM
from fixgraph.llm.backends.openai_compat import OpenAICompatibleLLM
from fixgraph.llm.base import Completion, FakeLLM, LLMError, LLMUnavailableError
from fixgraph.llm.client import LLMClient

REPLY = {
    "abstain": False,
    "sentences": [
        {"text": 'Open "Settings" \u2192 Wi\u2011Fi.', "citations": [1]},
        {"text": "Then pick\nyour network \\ SSID.", "citations": [2, 3]},
    ],
}


def feed(reader: ReplyReader, text: str, cuts: list[int]) -> tuple[str, list[tuple[str, list[int]]]]:
    shown, sentences = "", []
    points = sorted({0, *[c % (len(text) + 1) for c in cuts], len(text)})
    for a, b in itertools.pairwise(points):
        new, done = reader.feed(text[a:b])
        shown += new
        sentences += done
    return shown, sentences


@given(st.lists(st.integers(min_value=0, max_value=400), max_size=40))
def test_reply_reader_shows_the_final_text_however_the_reply_is_cut(cuts: list[int]) -> None:
    text = json.dumps(REPLY, ensure_ascii=True)  # \u escapes may be cut anywhere too
    shown, sentences = feed(ReplyReader(), text, cuts)
    parsed = parse_reply(text)
    assert shown == " ".join(s for s, _ in parsed.sentences)
    assert sentences == parsed.sentences


@given(st.lists(st.integers(min_value=0, max_value=200), max_size=20))
def test_reply_reader_strips_markers_from_plain_text(cuts: list[int]) -> None:
    text = "Open Settings [1]. Press [Enter] then wait [2, 3]. Done."
    shown, sentences = feed(ReplyReader(), text, cuts)
    assert shown == "Open Settings. Press [Enter] then wait. Done."
    assert sentences == []  # plain text: citations are read from the whole reply at the end


def test_fake_llm_streams_pieces_that_add_up_to_the_reply() -> None:
    llm = FakeLLM(default="one two  three")
    items = list(llm.stream("prompt"))
    assert items[:-1] == ["one", " two", "  three"] and isinstance(items[-1], Completion)
    assert items[-1].text == "one two  three" and llm.streamed_tokens == 3


def test_client_stream_caches_counts_and_replays(tmp_path: Path) -> None:
    backend = FakeLLM(default="alpha beta")
    client = LLMClient(backend, cache={"path": str(tmp_path / "c.sqlite")})
    first = list(client.stream("q", stage="answer"))
    again = list(client.stream("q", stage="answer"))
    assert first[:-1] == ["alpha", " beta"] and again[:-1] == ["alpha beta"]  # a cache hit is one delta
    assert len(backend.requests) == 1
    usage = client.usage.stage("answer")
    assert usage.calls == 2 and usage.cached_calls == 1


def test_closing_a_stream_early_stops_the_backend_and_frees_its_slot() -> None:
    backend = FakeLLM(default=" ".join(["w"] * 100), token_delay_s=0.001)
    client = LLMClient(backend, cache={"enabled": False}, max_concurrency=1)
    stream = client.stream("q")
    assert [next(stream) for _ in range(3)] == ["w", " w", " w"]
    stream.close()
    assert backend.streamed_tokens == 3
    assert client._slots.acquire(timeout=1)  # the slot came back
    client._slots.release()
    assert client.usage.totals() == {}  # a reply cut short is not counted as a call


def test_a_backend_without_stream_answers_in_one_piece() -> None:
    class Plain:
        name = kind = "plain"
        supports_schema = False

        def identity(self) -> str:
            return "plain"

        def complete(self, prompt: str, **params: Any) -> Completion:
            return Completion("whole reply", 1, 2, 0.0)

    items = list(LLMClient(Plain(), cache={"enabled": False}).stream("q"))
    assert items[0] == "whole reply" and items[1].output_tokens == 2


class _Streaming:
    """A local server that answers POSTs with lines written with pauses (SSE or NDJSON)."""

    def __init__(self, lines: list[str], pause_s: float = 0.0, status: int = 200) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.sent = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                outer.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    for line in lines:
                        self.wfile.write((line + "\n").encode())
                        self.wfile.flush()
                        outer.sent += 1
                        time.sleep(pause_s)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> _Streaming:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _sse(payload: dict[str, Any]) -> str:
    return "data: " + json.dumps(payload) + "\n"


def openai_lines(words: list[str]) -> list[str]:
    chunks = [_sse({"model": "m", "choices": [{"delta": {"role": "assistant"}}]})]
    chunks += [_sse({"model": "m", "choices": [{"delta": {"content": w}}]}) for w in words]
    chunks += [_sse({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": len(words)}}), "data: [DONE]\n"]
    return chunks


def test_openai_compatible_streams_deltas_and_usage() -> None:
    with _Streaming(openai_lines(["Hel", "lo", " there"])) as server:
        llm = OpenAICompatibleLLM(model="m", base_url=server.url + "/v1", api_key="k")
        items = list(llm.stream("hi", max_tokens=5, schema={"type": "object"}))
    assert items[:-1] == ["Hel", "lo", " there"]
    done = items[-1]
    assert isinstance(done, Completion) and (done.text, done.input_tokens, done.output_tokens) == ("Hello there", 11, 3)
    body = server.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 5 and body["response_format"]["type"] == "json_schema"


def test_ollama_streams_ndjson_until_done() -> None:
    lines = [json.dumps({"message": {"content": w}, "done": False}) for w in ["a", "b"]]
    lines.append(json.dumps({"message": {"content": ""}, "done": True, "prompt_eval_count": 7, "eval_count": 2}))
    with _Streaming(lines) as server:
        items = list(OllamaLLM(model="m", host=server.url).stream("hi", max_tokens=4))
    assert items[:-1] == ["a", "b"] and items[-1].text == "ab" and items[-1].input_tokens == 7
    assert server.bodies[0]["stream"] is True and server.bodies[0]["options"]["num_predict"] == 4


def test_closing_a_server_stream_closes_the_connection() -> None:
    words = [f" w{i}" for i in range(200)]
    with _Streaming(openai_lines(words), pause_s=0.01) as server:
        stream = OpenAICompatibleLLM(model="m", base_url=server.url + "/v1").stream("hi")
        assert next(stream) == " w0"
        stream.close()
        time.sleep(0.3)  # the server notices the closed socket on its next writes
        sent = server.sent
        time.sleep(0.2)
        assert server.sent == sent < 100


@pytest.mark.parametrize(
    ("lines", "status", "error"),
    [
        (["data: {not json"], 200, "not JSON"),
        (openai_lines(["a"])[:-1], 200, r"without `data: \[DONE\]`"),
        (['{"error": "model not found"}'], 404, "HTTP 404"),
    ],
)
def test_broken_streams_raise_llm_errors(lines: list[str], status: int, error: str) -> None:
    with _Streaming(lines, status=status) as server, pytest.raises(LLMError, match=error):
        list(OpenAICompatibleLLM(model="m", base_url=server.url + "/v1").stream("hi"))


def test_stalled_and_unreachable_servers() -> None:
    with _Streaming(openai_lines(["a", "b"]), pause_s=1.0) as server, pytest.raises(LLMError, match="sent nothing"):
        list(OpenAICompatibleLLM(model="m", base_url=server.url + "/v1", timeout_s=0.3).stream("hi"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(LLMUnavailableError, match="cannot reach"):
        list(OllamaLLM(model="m", host=f"http://127.0.0.1:{port}").stream("hi"))
