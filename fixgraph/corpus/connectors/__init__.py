"""Corpus connectors beyond Mallard; importing this package registers each one in `CORPORA`."""

from fixgraph.corpus.connectors import exports, folder, git_history, hf_datasets, manpages, scraper

__all__ = ["exports", "folder", "git_history", "hf_datasets", "manpages", "scraper"]
