"""A cross-encoder reranker: sentence-transformers `CrossEncoder` over (query, chunk text) pairs.

No pretrained cross-encoder exists offline, so the model is the one `fixgraph train-reranker` fine-tunes
from MiniLM on pairs derived from the corpus (fixgraph/training/). Its folder carries a
`fixgraph_model.json` manifest with the weights' sha256: that hash is the scorer's identity, so the
candidate cache and stage keys change whenever the model is retrained.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from fixgraph.io import read_json, stable_hash
from fixgraph.modelpaths import MODEL_CARD, ModelNotFoundError
from fixgraph.retrieval.rerank import RERANKERS, ScorerReranker

MANIFEST = MODEL_CARD
BACKENDS = ("torch", "onnx")


def model_manifest(path: Path) -> dict[str, Any]:
    manifest = path / MANIFEST
    if not manifest.exists():
        raise ModelNotFoundError(
            f"cross-encoder {path}: no {MANIFEST}; train it with `fixgraph train-reranker` (or `dvc repro`)"
        )
    data: dict[str, Any] = read_json(manifest)
    return data


@lru_cache(maxsize=2)
def _load(path: str, max_length: int, quantize: bool, threads: int) -> Any:
    import torch
    from sentence_transformers import CrossEncoder

    if threads > 0:
        torch.set_num_threads(threads)
    model = CrossEncoder(path, max_length=max_length, device="cpu")
    model.eval()
    if quantize:
        # int8 dynamic quantisation of the Linear layers: ~2x faster on CPU for a small ranking loss
        torch.ao.quantization.quantize_dynamic(model[0].model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
    return model


@RERANKERS.register("cross_encoder")
class CrossEncoderReranker(ScorerReranker):
    def __init__(
        self,
        name: str = "cross_encoder",
        model: str = "artifacts/models/cross_encoder",
        max_length: int = 256,
        batch_size: int = 32,
        top_n: int = 30,
        quantize: bool = False,
        threads: int = 0,
        backend: str = "torch",
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"reranker {name}: unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
        self.name = name
        self.backend = backend
        self.path = Path(model)
        self.max_length = max_length
        self.batch_size = batch_size
        self.top_n = top_n
        self.quantize = quantize
        self.threads = threads

    def identity(self) -> str:
        manifest = model_manifest(self.path)
        return stable_hash(
            {
                "kind": "cross_encoder",
                "weights": manifest["weights_sha256"],
                "max_length": self.max_length,
                "quantize": self.quantize,
                "backend": self.backend,
            }
        )

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        if not passages:
            return np.zeros(0, dtype=np.float32)
        manifest = model_manifest(self.path)  # a clear error before sentence-transformers' own
        if self.backend == "onnx":
            return self._score_onnx(query, passages, manifest)
        import torch

        model = _load(str(self.path), self.max_length, self.quantize, self.threads)
        scores = model.predict(
            [(query, p) for p in passages],
            batch_size=self.batch_size,
            show_progress_bar=False,
            activation_fn=torch.nn.Identity(),  # raw logits: blends z-normalise them, a sigmoid would squash
            convert_to_numpy=True,
        )
        return np.asarray(scores, dtype=np.float32).reshape(-1)

    def _score_onnx(self, query: str, passages: Sequence[str], manifest: dict[str, Any]) -> np.ndarray:
        from fixgraph.embedders import onnx_runtime

        model = _load(str(self.path), self.max_length, False, self.threads)
        path = onnx_runtime.cached_model(
            model[0].model,
            stable_hash(manifest["weights_sha256"]),
            "logits",
            self.quantize,
            inputs=model.tokenizer.model_input_names,
        )
        scores = []
        for first in range(0, len(passages), self.batch_size):
            batch = list(passages[first : first + self.batch_size])
            features = model.tokenizer(
                [query] * len(batch),
                batch,
                truncation="only_second",
                max_length=self.max_length,
                padding=True,
                return_tensors="np",
            )
            scores.append(onnx_runtime.run(path, self.threads, features).reshape(-1))
        return np.concatenate(scores).astype(np.float32)
