"""Reading an answering model's reply: JSON sentences with citations, or plain text as a fallback.

Small models sometimes ignore the requested JSON (or stop at max_tokens mid-object). Rather than lose
the answer, a reply that does not validate is read as plain text: sentences split on end punctuation,
`[n]` / `[n, m]` markers taken as citations. Abstention is recognised in both forms.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from fixgraph.llm.structured import check

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "abstain": {"type": "boolean"},
        "sentences": {
            "type": "array",
            "maxItems": 8,
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "maxLength": 600},
                    "citations": {"type": "array", "maxItems": 6, "items": {"type": "integer"}},
                },
                "required": ["text", "citations"],
            },
        },
    },
    "required": ["abstain", "sentences"],
}

MARKER = re.compile(r"\s*\[(\d+(?:\s*,\s*\d+)*)\]")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
ABSTAIN_TEXT = re.compile(
    r"\b(i don'?t know|cannot answer|can'?t answer|not (?:contain|mention|covered)|no information)\b", re.I
)


@dataclass
class ParsedAnswer:
    abstained: bool
    sentences: list[tuple[str, list[int]]] = field(default_factory=list)  # (text, source numbers)
    format: str = "json"  # json | truncated_json | invalid_json | text | empty


def model_abstained(parsed: ParsedAnswer) -> bool:
    """The model said it cannot answer (an empty or unusable reply is a failure, not an abstention)."""
    return parsed.abstained and parsed.format not in ("empty", "invalid_json")


def parse_reply(text: str) -> ParsedAnswer:
    value, problem = check(text, ANSWER_SCHEMA)
    if problem is None:
        sentences = [
            (str(s["text"]).strip(), [int(n) for n in s["citations"]])
            for s in value["sentences"]
            if str(s["text"]).strip()
        ]
        # sentences are kept even with abstain=true: whether to honour the abstention is the caller's policy
        return ParsedAnswer(bool(value["abstain"]) or not sentences, sentences)
    return parse_text(text)


TRUNCATED_SENTENCE = re.compile(r'"text"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"citations"\s*:\s*\[([\d,\s]*)\]')


def parse_truncated(text: str) -> ParsedAnswer | None:
    """The complete sentence objects of a JSON reply cut off by max_tokens (None when it is not one)."""
    sentences = []
    for raw, numbers in TRUNCATED_SENTENCE.findall(text):
        try:
            sentence = json.loads(f'"{raw}"').strip()
        except json.JSONDecodeError:
            continue
        if sentence:
            sentences.append((sentence, [int(n) for n in numbers.split(",") if n.strip()]))
    if not sentences:  # cut inside the first sentence: keep what was written, uncited
        partial = re.search(r'"text"\s*:\s*"((?:[^"\\]|\\.)*)', text)
        if partial and partial.group(1).strip():
            sentences.append((partial.group(1).rstrip("\\").strip(), []))
    if not sentences and not re.search(r'"abstain"\s*:\s*true', text):
        return None
    return ParsedAnswer(bool(re.search(r'"abstain"\s*:\s*true', text)) or not sentences, sentences, "truncated_json")


def parse_text(text: str) -> ParsedAnswer:
    body = text.strip()
    if not body:
        return ParsedAnswer(True, [], "empty")
    if body.startswith("{"):  # JSON that is neither valid nor a truncated answer: nothing usable
        return parse_truncated(body) or ParsedAnswer(True, [], "invalid_json")
    sentences: list[tuple[str, list[int]]] = []
    for piece in SENTENCE_END.split(body):
        numbers = [int(n) for group in MARKER.findall(piece) for n in group.split(",")]
        clean = MARKER.sub("", piece).strip()
        if clean:
            sentences.append((clean, numbers))
    abstained = not sentences or (len(sentences) == 1 and bool(ABSTAIN_TEXT.search(sentences[0][0])))
    return ParsedAnswer(abstained, [] if abstained else sentences, "text")


PARTIAL_MARKER = re.compile(r"\s*\[[\d,\s]*$")
TEXT_KEY = re.compile(r'"text"\s*:\s*"')
ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _decode_partial(raw: str, start: int) -> tuple[str, bool]:
    """The JSON string starting at raw[start] (after its opening quote), decoded as far as it is
    complete, and whether its closing quote was seen. An escape cut off mid-way is left for later."""
    out: list[str] = []
    i = start
    while i < len(raw):
        char = raw[i]
        if char == '"':
            return "".join(out), True
        if char != "\\":
            out.append(char)
            i += 1
            continue
        if i + 1 >= len(raw):
            break
        code = raw[i + 1]
        if code == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) < 4:
                break
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                out.append(digits)
            i += 6
            continue
        out.append(ESCAPES.get(code, code))
        i += 2
    return "".join(out), False


class ReplyReader:
    """Reads a reply while it streams in: what a person should see so far (the sentences' text, not
    the JSON around them; plain text without its `[n]` markers) and each sentence object as it
    completes, with its source numbers. `feed` returns only what is new, so the text a client
    assembles from the deltas is the answer's text. The final answer is still `parse_reply` of the
    whole reply; this is the live view of it."""

    def __init__(self) -> None:
        self.buffer = ""
        self.shown = ""
        self.sentences = 0

    def _visible(self) -> str:
        body = self.buffer.lstrip()
        if body.startswith("```"):
            body = body.split("\n", 1)[1] if "\n" in body else ""
        if not body.startswith("{"):
            visible = PARTIAL_MARKER.sub("", MARKER.sub("", body))
        else:
            visible = " ".join(_decode_partial(body, m.end())[0].lstrip() for m in TEXT_KEY.finditer(body))
        # trailing whitespace is held back until something follows it, so the view only ever grows
        return visible.rstrip()

    def feed(self, delta: str) -> tuple[str, list[tuple[str, list[int]]]]:
        """(new visible text, sentence objects completed by this delta)."""
        self.buffer += delta
        visible = self._visible()
        new = visible[len(self.shown) :] if visible.startswith(self.shown) else ""
        self.shown += new
        done: list[tuple[str, list[int]]] = []
        if self.buffer.lstrip().startswith(("{", "```")):
            complete = TRUNCATED_SENTENCE.findall(self.buffer)
            for raw, numbers in complete[self.sentences :]:
                text, _ = _decode_partial(raw + '"', 0)
                done.append((text.strip(), [int(n) for n in numbers.split(",") if n.strip()]))
            self.sentences = len(complete)
        return new, done
