"""ltr's dense signals from an mpnet fine-tuned on the *other* corpus's dev questions, held out by corpus.

For each corpus of the signal rows (`fixgraph fit-ltr`'s signals.parquet: every candidate of every dev
question of each part), a copy of the ltr system's embedder is trained one epoch on the other corpus's
questions (each gold chunk's index text as the positive, two of the first stage's top-15 non-gold chunks as
hard negatives, multiple-negatives ranking loss), then this corpus's whole dense index (chunks and lines) is
embedded with it and `own`, `line`, `page_best`, `page_rank` are computed again as the retriever does
(columns `<signal>_ft`). Candidates and the other signals stay. `compare` prints ltr held out by corpus on
the stock signals and on the fine-tuned ones, with paired sign-flip tests. Dev rows only: fit-ltr refuses
locked questions. About 15 min of CPU per corpus on 2 cores (docs/results/quality.md, "mpnet fine-tuned on
the other corpus's dev questions"). This was the measurement; the built system is `ltr_ft` (trainer
`bi_encoder_mpnet_questions`, Lightning; first stage and link contexts on the fine-tuned model too), compared
with ltr by `experiments/quality/ltr_ft.py`.

    fixgraph fit-ltr --parts dev:gnome_help,...,evolution_dev:evolution_help --hold-out none --no-track
    python experiments/quality/finetuned_dense.py signals --signals artifacts/ltr_fit/ltr_fitted/signals.parquet \\
        --out /tmp/ft.parquet
    python experiments/quality/finetuned_dense.py compare --signals /tmp/ft.parquet

`signals --fold-parts P1,P2` asks what a model trained on a corpus's *own* dev questions gives its unseen
questions: the parts fall in two folds, each scored by one model trained on the other fold's questions of both
corpora, and `compare` holds the ltr weights out by fold too.
"""

from __future__ import annotations

import argparse
import copy
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fixgraph.config import compose, systems_of
from fixgraph.evaluation.parts import parse_parts, part_config
from fixgraph.evaluation.splits import resolve_questions
from fixgraph.experiment.ltr_fit import fit_weights, held_out, recall_at, summary
from fixgraph.pipeline.stages import load_chunks, open_system
from fixgraph.retrieval.ltr import SIGNALS, page_scores

DENSE = ("own", "line", "page_best", "page_rank")  # the signals the embedder computes


def triples(rows: pd.DataFrame, questions: dict[str, str], texts: dict[str, str], seed: int = 0) -> dict[str, list]:
    rng = random.Random(seed)
    out: dict[str, list] = {"anchor": [], "positive": [], "negative": []}
    for qid, group in rows.groupby("qid"):
        negatives = group[~group["gold"] & (group["base_rank"] < 30)].sort_values("base_rank")["chunk"].tolist()[:15]
        for positive in group[group["gold"]]["chunk"]:
            for negative in rng.sample(negatives, min(2, len(negatives))):
                out["anchor"].append(questions[str(qid)])
                out["positive"].append(texts[positive])
                out["negative"].append(texts[negative])
    return out


def train(base: Any, data: dict[str, list], folder: Path, epochs: float) -> Any:
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer import losses

    model = copy.deepcopy(base)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(folder), num_train_epochs=epochs, per_device_train_batch_size=16, learning_rate=2e-5,
        warmup_steps=0.1, save_strategy="no", report_to=[], seed=0, use_cpu=True,
    )  # fmt: skip
    loss = losses.MultipleNegativesRankingLoss(model)
    SentenceTransformerTrainer(model=model, args=args, train_dataset=Dataset.from_dict(data), loss=loss).train()
    return model


class Index:
    """A corpus's dense retriever and where each chunk and page sits in it."""

    def __init__(self, dense: Any, chunks: list) -> None:
        self.dense, self.chunks = dense, chunks
        self.position = {c.id: i for i, c in enumerate(chunks)}
        pages = sorted({c.doc_id for c in chunks})
        number = {p: i for i, p in enumerate(pages)}
        self.page = np.array([number[c.doc_id] for c in chunks])
        self.n_pages = len(pages)

    def signals(self, vector: np.ndarray, ids: list[str]) -> np.ndarray:
        """own, line, page_best, page_rank of `ids`, as LearnedRankRetriever.signals computes them."""
        own, line = self.dense.own_and_line(vector)
        blocks = self.dense.blend(own, line)
        page_best, rank = page_scores(blocks, self.page, self.n_pages)
        at = [self.position[i] for i in ids]
        pages = self.page[at]
        return np.column_stack([own[at], line[at], page_best[pages] - blocks.max(), 1.0 / rank[pages]])


def signals(
    rows: pd.DataFrame,
    system: str,
    workdir: Path,
    epochs: float = 1.0,
    trainer: str | None = None,
    fold_parts: set[str] | None = None,
) -> pd.DataFrame:
    """The rows with `<signal>_ft` columns; epochs 0 keeps the stock model (the columns then equal the stock ones).
    With `trainer`, each corpus's model is the one that fixgraph trainer trained for it (no training here).
    By default each corpus is scored by a model trained on the other corpus's questions; with `fold_parts`, the
    rows fall in two folds (those parts, and the rest) and each fold is scored by one model trained on the other
    fold's questions of both corpora: what a model trained on a corpus's own dev questions gives questions of the
    same corpus it has not seen (a `fold` column says which fold each row is in)."""
    rows = rows.reset_index(drop=True)
    questions: dict[str, str] = {}
    indexes: dict[str, Index] = {}
    for part in parse_parts(",".join(map(str, rows["part"].unique()))):
        cfg = part_config(part, system)
        questions |= {q.qid: q.question for q in resolve_questions(cfg, part.questions, None).questions}
        if part.corpus not in indexes:
            chunks = load_chunks(cfg)
            dense = open_system(cfg, system, systems_of(cfg)[system], chunks).first_stage.dense
            indexes[part.corpus] = Index(dense, chunks)
    texts = {c.id: c.index_text() for index in indexes.values() for c in index.chunks}
    stock = {corpus: index.dense.embedder.model for corpus, index in indexes.items()}
    fold = rows["corpus"] if fold_parts is None else rows["part"].isin(fold_parts).map({True: "b", False: "a"})
    out = np.zeros((len(rows), len(DENSE)))
    for held in sorted(fold.unique()):
        scored = rows[fold == held]
        model = None
        if trainer is None and epochs > 0:
            data = triples(rows[fold != held], questions, texts)
            model = train(stock[scored["corpus"].iloc[0]], data, workdir / f"without_{held}", epochs)
        for corpus, index in indexes.items():
            if not scored["corpus"].eq(corpus).any():
                continue
            if trainer is not None:
                from sentence_transformers import SentenceTransformer

                folder = compose([f"corpus={corpus}"]).training.trainers[trainer].output  # trained for this corpus
                model = SentenceTransformer(str(folder), device="cpu")
                model.max_seq_length = stock[corpus].max_seq_length
            if model is not None:
                texts_of_index, _, _ = index.dense._rows(index.chunks)
                vectors = model.encode(texts_of_index, batch_size=32, normalize_embeddings=True)
                index.dense._matrix = np.asarray(vectors, dtype=np.float32)
            encoder = model if model is not None else stock[corpus]
            for qid, group in scored[scored["corpus"] == corpus].groupby("qid"):
                vector = encoder.encode([questions[str(qid)]], normalize_embeddings=True)[0].astype(np.float32)
                out[group.index] = index.signals(vector, group["chunk"].tolist())
            how = f"trainer {trainer}'s model" if trainer else "a model trained here" if model else "the stock model"
            print(f"{corpus}, held out {held}: scored with {how}", flush=True)
    return rows.assign(fold=fold, **{f"{s}_ft": out[:, i] for i, s in enumerate(DENSE)})


def compare(rows: pd.DataFrame) -> None:
    """ltr held out as the rows were scored (by corpus, or by `signals --fold-parts` fold), stock vs fine-tuned."""
    key = "fold" if "fold" in rows else "corpus"  # rows of `signals` hold "fold" (the corpus when by corpus)
    tuned = [f"{s}_ft" if s in DENSE else s for s in SIGNALS]
    stock = held_out(rows, key, SIGNALS)
    fitted = held_out(rows, key, tuned)
    strict = []  # weights fitted on the other group's stock signals: nothing that saw this group's questions
    for held in rows[key].unique():
        test = rows[rows[key] == held]
        weights = fit_weights(rows[rows[key] != held], SIGNALS)
        strict.append(recall_at(test.assign(strict=test[tuned].to_numpy() @ weights), "strict"))
    ltr = stock.rename(columns={"fitted": "ltr"})
    for name, recall in (("fine-tuned signals", fitted["fitted"]), ("stock weights on them", pd.concat(strict))):
        print(f"\n{name} (held out by {key}) vs ltr\n{summary(ltr.assign(tuned=recall), 'ltr', 'tuned').round(3)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    making = sub.add_parser("signals")
    making.add_argument("--signals", type=Path, required=True, help="fixgraph fit-ltr's signals.parquet")
    making.add_argument("--system", default="ltr")
    making.add_argument("--out", type=Path, required=True)
    making.add_argument("--workdir", type=Path, default=Path("/tmp/finetuned_dense"))
    making.add_argument("--epochs", type=float, default=1.0, help="0: the stock model (the stock columns again)")
    making.add_argument("--trainer", help="use the models this fixgraph trainer trained per corpus (no training)")
    making.add_argument(
        "--fold-parts",
        help="comma-separated parts of one fold: hold out by fold (both corpora train) instead of corpus",
    )
    comparing = sub.add_parser("compare")
    comparing.add_argument("--signals", type=Path, required=True, help="the rows `signals` wrote")
    args = parser.parse_args()
    if args.command == "signals":
        folds = set(args.fold_parts.split(",")) if args.fold_parts else None
        rows = signals(pd.read_parquet(args.signals), args.system, args.workdir, args.epochs, args.trainer, folds)
        rows.to_parquet(args.out)
    else:
        compare(pd.read_parquet(args.signals))


if __name__ == "__main__":
    main()
