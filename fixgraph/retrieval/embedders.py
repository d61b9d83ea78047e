"""The `embedder` registry and an embedding cache keyed by model identity and text hash."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from fixgraph.io import atomic_path, sha256_text, stable_hash
from fixgraph.modelpaths import model_identity, resolve_model_path
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


EMBEDDERS: Registry[Embedder] = Registry("embedder")


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
    def __init__(
        self,
        name: str,
        model: str,
        batch_size: int = 64,
        max_seq_length: int = 256,
        normalize: bool = True,
        query_prefix: str = "",
        document_prefix: str = "",
        **_: Any,
    ) -> None:
        self.name = name
        self.model_name = model
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.normalize = normalize
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self._model: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = _load_sentence_transformer(str(resolve_model_path(self.model_name)), self.max_seq_length)
        return self._model

    @property
    def dim(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())

    def identity(self) -> str:
        return stable_hash(
            {
                "model": model_identity(self.model_name),
                "max_seq_length": self.max_seq_length,
                "normalize": self.normalize,
                "document_prefix": self.document_prefix,
            }
        )

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.model.encode(
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
        return self._encode([self.query_prefix + t for t in texts])


@EMBEDDERS.register("hashing")
class HashingEmbedder:
    """Feature-hashed bag of words: no model, deterministic, for smoke runs and fast tests."""

    def __init__(self, name: str = "hashing", dim: int = 512, **_: Any) -> None:
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


class EmbeddingCache:
    """Document vectors stored per embedder identity, looked up by the hash of the embedded text."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _file(self, embedder: Embedder) -> Path:
        return self.root / f"{embedder.identity()[:24]}.npz"

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        path = self._file(embedder)
        known: dict[str, np.ndarray] = {}
        if path.exists():
            with np.load(path) as data:
                known = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
        keys = [sha256_text(t) for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in known}.items())
        if missing:
            vectors = embedder.embed_documents([t for _, t in missing])
            known.update({k: v for (k, _), v in zip(missing, vectors, strict=True)})
            self.root.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp, open(tmp, "wb") as fh:
                np.savez(fh, keys=np.array(list(known)), vectors=np.stack(list(known.values())))
        if not keys:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        return np.stack([known[k] for k in keys]).astype(np.float32)


def build_embedder(cfg: Any) -> Embedder:
    from fixgraph.config import build

    return build(EMBEDDERS, cfg)
