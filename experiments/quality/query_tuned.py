"""mpnet's query side fine-tuned against the stock document index, held out by fold of the dev parts.

ltr_dev's model fine-tunes the whole of mpnet, so every chunk and line must be embedded again (about 45 min
of indexing on 2 cores) after about 55 min of training. Here only the query encoder learns: documents keep
their stock mpnet vectors (already cached), and each training question is scored against every row of its
corpus's index (chunks and lines, blended as dense_mpnet_blocks blends them), so all other chunks are its
negatives. Training touches short questions only: minutes, not an hour.

Folds as experiments/quality/ltr_dev_folds.py: fold a is trainer bi_encoder_mpnet_dev_fold_a's five parts,
fold b the other two; a query encoder trained on one fold's questions (both corpora) ranks the other fold's.
The recipe is bi_encoder_mpnet_dev's (learning rate 2e-5, batch 16, scale 20, two epochs, 10% warm-up), set
before any run. Prints recall@8 and MRR per part and system, stock and tuned queries, and writes per-question
rows to --out for paired tests. Dev parts only (resolve_questions refuses locked questions).

    python experiments/quality/query_tuned.py --out /tmp/query_tuned.parquet
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fixgraph.config import compose, systems_of
from fixgraph.embedders.encoders import SentenceTransformerEmbedder
from fixgraph.evaluation.gold import map_gold
from fixgraph.evaluation.metrics import retrieval_metrics
from fixgraph.evaluation.splits import resolve_questions
from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system

SYSTEMS = ("dense_mpnet_blocks", "link_expansion_blocks", "ltr")


@dataclass
class Part:
    name: str
    cfg: Any
    questions: list[Any]
    chunks: list[Any]
    mapping: Any


@dataclass
class Index:
    """A corpus's stock dense_mpnet_blocks rows, as torch tensors."""

    matrix: Any
    owner: Any
    is_line: Any
    chunks: int
    block_weight: float
    position: dict[str, int]


def load_part(part: str) -> Part:
    split, corpus = part.split(":")
    cfg = compose([f"split={split}", f"corpus={corpus}", "experiment=leaderboard"])
    questions = resolve_questions(cfg, None, None).questions
    chunk(cfg)
    chunks = load_chunks(cfg)
    return Part(part, cfg, questions, chunks, map_gold(questions, load_documents(cfg), chunks))


def load_index(part: Part) -> Index:
    import torch

    dense = open_system(part.cfg, "dense_mpnet_blocks", systems_of(part.cfg)["dense_mpnet_blocks"], part.chunks)
    first = dense.first_stage
    return Index(
        torch.from_numpy(np.asarray(first._matrix, dtype=np.float32)),
        torch.from_numpy(first._owner),
        torch.from_numpy(first._is_line),
        len(first._ids),
        float(first.block_weight),
        {cid: i for i, cid in enumerate(first._ids)},
    )


def chunk_scores(index: Index, q: Any) -> Any:
    """dense_mpnet_blocks' chunk scores for one query vector, differentiable (DenseRetriever.own_and_line)."""
    import torch

    rows = index.matrix @ q
    empty = torch.full((index.chunks,), -1e4, dtype=rows.dtype)
    own = empty.scatter_reduce(0, index.owner[~index.is_line], rows[~index.is_line], "amax")
    line = empty.scatter_reduce(0, index.owner[index.is_line], rows[index.is_line], "amax")
    line = torch.where(line > -1e3, line, own)
    return (1 - index.block_weight) * own + index.block_weight * line


def examples(part: Part, index: Index) -> list[tuple[str, str, list[list[int]]]]:
    """(question, corpus, gold items as chunk positions) for every question with a mapped gold chunk."""
    corpus = part.name.split(":")[1]
    out = []
    for q in part.questions:
        items = [[index.position[c] for c in i.chunk_ids] for i in part.mapping.for_question(q.qid) if i.chunk_ids]
        if items:
            out.append((q.question, corpus, items))
    return out


def encode(model: Any, texts: Sequence[str]) -> Any:
    import torch

    features = model.tokenizer(list(texts), padding=True, truncation=True, max_length=128, return_tensors="pt")
    hidden = model[0].auto_model(**features).last_hidden_state
    mask = features["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def train(path: Path, data: list[tuple[str, str, list[list[int]]]], indexes: dict[str, Index], seed: int) -> Any:
    """A copy of mpnet whose encoder is trained so its question vectors rank the gold rows of the frozen index."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = SentenceTransformer(str(path), device="cpu")
    net = model[0].auto_model
    net.train()
    batch, epochs, scale, lr = 16, 2, 20.0, 2e-5
    steps = epochs * ((len(data) + batch - 1) // batch)
    optimiser = torch.optim.AdamW(net.parameters(), lr=lr)
    warm = max(1, int(0.1 * steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm)))
    )
    step = 0
    for epoch in range(epochs):
        order = list(range(len(data)))
        rng.shuffle(order)
        for start in range(0, len(order), batch):
            rows = [data[i] for i in order[start : start + batch]]
            vectors = encode(model, [r[0] for r in rows])
            losses = []
            for vector, (_, corpus, items) in zip(vectors, rows, strict=True):
                logp = torch.log_softmax(scale * chunk_scores(indexes[corpus], vector), dim=0)
                losses += [-torch.logsumexp(logp[item], dim=0) for item in items]
            loss = torch.stack(losses).mean()
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            optimiser.step()
            schedule.step()
            step += 1
            print(f"  epoch {epoch} step {step}/{steps} loss {loss.item():.3f}", flush=True)
    net.eval()
    return model


def queries_from(model: Any) -> Callable[[Any, Sequence[str]], np.ndarray]:
    import torch

    def embed_queries(self: Any, texts: Sequence[str]) -> np.ndarray:
        with torch.inference_mode():
            return encode(model, texts).numpy().astype(np.float32)

    return embed_queries


def score(part: Part, label: str) -> pd.DataFrame:
    doc_of = {c.id: c.doc_id for c in part.chunks}
    frames = []
    for name in SYSTEMS:
        system = open_system(part.cfg, name, systems_of(part.cfg)[name], part.chunks)  # fresh: no kept query
        rankings = {q.qid: system.search(q.question, 100) for q in part.questions}
        frame = retrieval_metrics(part.questions, part.mapping, rankings, doc_of, [8], 10)
        qtype = {q.qid: q.qtype for q in part.questions}
        frame = frame.assign(part=part.name, system=name, queries=label)
        frame["qtype"] = [qtype[qid] for qid in frame.index]
        frames.append(frame.reset_index(names="qid"))
        print(part.name, name, label, round(frame["recall_at_8"].mean(), 3), round(frame["mrr"].mean(), 3), flush=True)
    return pd.concat(frames)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    base = compose(["experiment=leaderboard"])
    trainers = base.training.trainers
    fold_a = list(trainers.bi_encoder_mpnet_dev_fold_a.data.questions)
    fold_b = [p for p in trainers.bi_encoder_mpnet_dev.data.questions if p not in fold_a]
    parts = {p: load_part(p) for p in fold_a + fold_b}
    indexes: dict[str, Index] = {}
    for part in parts.values():
        corpus = part.name.split(":")[1]
        if corpus not in indexes:
            indexes[corpus] = load_index(part)
    stock = SentenceTransformerEmbedder  # every mpnet system's query side goes through this class
    path = open_system(
        parts[fold_a[0]].cfg,
        "dense_mpnet_blocks",
        systems_of(parts[fold_a[0]].cfg)["dense_mpnet_blocks"],
        parts[fold_a[0]].chunks,
    ).first_stage.embedder.model_path()
    frames = [score(part, "stock") for part in parts.values()]
    original = stock.embed_queries
    for train_parts, test_parts in ((fold_a, fold_b), (fold_b, fold_a)):
        data = [e for p in train_parts for e in examples(parts[p], indexes[p.split(":")[1]])]
        started = time.perf_counter()
        model = train(path, data, indexes, args.seed)
        print(f"trained on {len(data)} questions in {time.perf_counter() - started:.0f} s", flush=True)
        stock.embed_queries = queries_from(model)  # type: ignore[method-assign]
        try:
            frames += [score(parts[p], "tuned") for p in test_parts]
        finally:
            stock.embed_queries = original  # type: ignore[method-assign]
    pd.concat(frames).to_parquet(args.out)


if __name__ == "__main__":
    main()
