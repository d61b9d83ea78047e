"""Answers and diagnoses as a sequence of events: what /ask/stream and /diagnose/stream send, and what
/ask and /diagnose collect into one reply.

An answer is the answerer's own three steps (prepare, one model call, finish), with the model call
streamed: `token` events carry the visible text as it grows, `citation` events each sentence's cited
chunks as the sentence completes, `done` the finished answer (verified when configured), its token
usage and latency. A reply the answerer cannot read (empty, or JSON that is neither valid nor a cut-off
answer) is an error, not an answer: the model is broken or misconfigured, and saying so beats
showing nothing.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from fixgraph.answer.base import GroundedAnswer
from fixgraph.answer.parsing import ReplyReader
from fixgraph.answer.verify import Verification
from fixgraph.corpus.models import Chunk
from fixgraph.kg.grounding import align
from fixgraph.llm.base import Completion, LLMError
from fixgraph.retrieval.base import Hit
from fixgraph.serve.service import Service

Event = tuple[str, dict[str, Any]]
SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")


class GarbageReplyError(LLMError):
    """The model answered, but nothing in the reply can be read as an answer."""


def _snap(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen [start, end) to the sentences of `text` it touches, so the highlight reads as prose."""
    before = [m.end() for m in SENTENCE_END.finditer(text, 0, start)]
    after = SENTENCE_END.search(text, max(end - 1, start))
    return (before[-1] if before else 0), (after.start() + 1 if after else len(text))


def citation(chunk: Chunk, sentence: str, quote: tuple[int, int] | None = None) -> dict[str, Any]:
    """Where in the cited chunk (and its document) the sentence is backed: the verifier's quote when it
    found one, else the chunk passage the sentence aligns with best (rapidfuzz partial alignment)."""
    if quote is not None:
        start, end = quote
        source, score = "verifier", 100.0
    else:
        score, start, end = align(sentence, chunk.text)
        start, end = _snap(chunk.text, start, end) if end > start else (0, len(chunk.text))
        source = "alignment"
    return {
        "chunk_id": chunk.id,
        "doc_id": chunk.doc_id,
        "title": chunk.title,
        "section": " > ".join(chunk.heading_path),
        "start": chunk.start + start,  # in the document's text
        "end": chunk.start + end,
        "chunk_start": start,  # in the chunk's text
        "chunk_end": end,
        "quote": chunk.text[start:end],
        "span_source": source,
        "alignment": round(float(score), 1),
    }


def _usage(answer: GroundedAnswer) -> dict[str, Any]:
    stages = {
        name: {"calls": c.calls, "input_tokens": c.input_tokens, "output_tokens": c.output_tokens}
        for name, c in answer.cost.items()
    }
    total = sum(s["input_tokens"] + s["output_tokens"] for s in stages.values())
    return {**stages, "total_tokens": total}


def verification_summary(verification: Verification | None) -> dict[str, Any]:
    if verification is None:
        return {"enabled": False, "unsupported_rate": None, "citation_recall": None, "citation_precision": None}
    return {
        "enabled": True,
        "unsupported_rate": verification.unsupported_rate,
        "citation_recall": verification.citation_recall,
        "citation_precision": verification.citation_precision,
        "reasons": verification.reason_counts(),
    }


def answer_payload(
    answer: GroundedAnswer, verification: Verification | None, chunks: Mapping[str, Chunk], latency: dict[str, float]
) -> dict[str, Any]:
    verdicts = verification.sentences if verification is not None else []
    sentences = []
    for i, sentence in enumerate(answer.sentences):
        verdict = verdicts[i] if i < len(verdicts) else None
        cites = []
        for cid in sentence.citations:
            quote = verdict.quotes.get(cid) if verdict is not None else None
            item = citation(chunks[cid], sentence.text, quote)
            if verdict is not None:
                item["verdict"] = verdict.reasons.get(cid)
            cites.append(item)
        sentences.append(
            {
                "text": sentence.text,
                "citations": cites,
                "supported": verdict.supported if verdict is not None else None,
            }
        )
    return {
        "answer": answer.text,
        "sentences": sentences,
        "abstained": answer.abstained,
        "abstain_reason": answer.abstain_reason,
        "context_ids": answer.context_ids,
        "stripped_citations": answer.stripped_citations,
        "reply_format": answer.reply_format,
        "prompt_version": answer.prompt_version,
        "verification": verification_summary(verification),
        "usage": _usage(answer),
        "latency": {k: round(v, 3) for k, v in latency.items()},
    }


def answer_events(
    service: Service,
    qid: str,
    question: str,
    hits: Sequence[Hit],
    system: str,
    verify: bool,
    latency: dict[str, float],
    cancel: threading.Event,
) -> Generator[Event, None, None]:
    """token / citation events while the model writes, then `done` (the full answer payload)."""
    answerer, llm, chunks = service.answerer, service.llm, service.chunks
    started = time.perf_counter()
    prepared = answerer.prepare(qid, question, hits, chunks, system)
    answer = prepared.result
    if prepared.prompt is not None:
        yield "progress", {"stage": "generating", "context": len(answer.context_ids)}
        reader = ReplyReader()
        completion: Completion | None = None
        tokens = 0
        shown = 0  # sentences whose citations were sent
        for item in llm.stream(prepared.prompt, stage="answer", **answerer.request(llm)):
            if cancel.is_set():
                return  # the client is gone: closing this generator closes the model's stream
            if isinstance(item, Completion):
                completion = item
                continue
            text, sentences = reader.feed(item)
            if text:
                if tokens == 0:  # the first visible text, after retrieval and prompt processing
                    latency["first_token_ms"] = 1000 * (time.perf_counter() - started) + latency.get("retrieve_ms", 0.0)
                tokens += 1
                yield "token", {"text": text, "index": tokens}
            for sentence, numbers in sentences:
                ids = [answer.context_ids[n - 1] for n in numbers if 1 <= n <= len(answer.context_ids)]
                cites = [citation(chunks[cid], sentence) for cid in dict.fromkeys(ids)]
                yield "citation", {"sentence": shown, "text": sentence, "citations": cites}
                shown += 1
        assert completion is not None  # LLMClient.stream always ends with the completion
        answer.stage("answer").add(completion, time.perf_counter() - started)
        latency["generate_ms"] = 1000 * (time.perf_counter() - started)
        answer = answerer.finish(prepared, completion.text)
        if answer.reply_format in ("empty", "invalid_json"):
            raise GarbageReplyError(
                f"the model's reply could not be read as an answer ({answer.reply_format}, "
                f"{len(completion.text)} characters, {completion.output_tokens} tokens)"
            )
        for i, finished in enumerate(answer.sentences[shown:], start=shown):  # plain-text replies
            cites = [citation(chunks[cid], finished.text) for cid in finished.citations]
            yield "citation", {"sentence": i, "text": finished.text, "citations": cites}
    verification = None
    if verify and service.verify_enabled and not answer.abstained and answer.cited_chunks:
        yield "progress", {"stage": "verifying", "pairs": sum(len(s.citations) for s in answer.sentences)}
        verify_started = time.perf_counter()
        verification = service.verifier.verify(answer, chunks)
        latency["verify_ms"] = 1000 * (time.perf_counter() - verify_started)
    yield "done", answer_payload(answer, verification, chunks, latency)


def ask_events(
    service: Service, question: str, system: str | None, k: int, verify: bool, cancel: threading.Event
) -> Generator[Event, None, None]:
    started = time.perf_counter()
    name = system or service.default_system
    yield "progress", {"stage": "retrieving", "system": name}
    hits: list[Hit] = []
    timings: dict[str, float] = {}
    if service.answerer.retrieves:
        depth = max(k, 20, 3 * int(service.cfg.answer.get("max_chunks", 8)))  # as deep as the answers run
        hits, timings = service.search_hits(question, depth, name)
    latency = {"retrieve_ms": 1000 * (time.perf_counter() - started)}
    yield (
        "meta",
        {
            "system": name,
            "question": question,
            "answerer": service.answerer.name,
            "llm": str(service.cfg.llm.name),
            "retrieved": [service.hit_info(i, h, with_text=False) for i, h in enumerate(hits[:k], start=1)],
            "timings": timings,
        },
    )
    for event, data in answer_events(service, "api", question, hits, name, verify, latency, cancel):
        if event == "done":
            data["latency"]["total_ms"] = round(1000 * (time.perf_counter() - started), 3)
            data["system"] = name
        yield event, data


def diagnose_question(log: str, messages: Sequence[str], max_chars: int = 1200) -> str:
    """What the model is asked about a log: its error lines (not the whole log), then the request."""
    shown = "\n".join(messages) if messages else log
    return (
        f"An application or the system logged this error:\n{shown[:max_chars]}\n"
        "What is the most likely cause, and how can it be fixed?"
    )


def diagnose_events(
    service: Service, log: str, system: str | None, explain: bool, verify: bool, cancel: threading.Event
) -> Generator[Event, None, None]:
    started = time.perf_counter()
    name = system or service.default_system
    yield "progress", {"stage": "diagnosing", "system": name}
    diagnosis = service.diagnoser.diagnose(
        log, lambda q, k: service.search_hits(q, k, name), depth=int(service.cfg.evaluation.depth)
    )
    latency = {"retrieve_ms": 1000 * (time.perf_counter() - started)}
    result = {"system": name, **diagnosis.as_dict()}
    yield "meta", result
    if not explain:
        yield "done", {**result, "explanation": None, "latency": {k: round(v, 3) for k, v in latency.items()}}
        return
    log_lines = log.splitlines()
    errors = [log_lines[s.line - 1].strip() for s in diagnosis.signatures if s.kind == "message"]
    question = diagnose_question(log, list(dict.fromkeys(errors)))
    for event, data in answer_events(service, "diagnose", question, diagnosis.ranking, name, verify, latency, cancel):
        if event == "done":
            latency_out = data.pop("latency")
            latency_out["total_ms"] = round(1000 * (time.perf_counter() - started), 3)
            yield "done", {**result, "explanation": data, "latency": latency_out}
        else:
            yield event, data
