"""Embedders (the `embedder` Hydra group): text -> vectors, with a cache and an onnxruntime query path."""
