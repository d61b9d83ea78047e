"""Retrieval stage: first-stage retrievers, fusion and reranking, one registry per Hydra group."""
