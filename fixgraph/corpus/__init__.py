"""Corpus stage: obtain sources, parse them into documents, chunk them along their structure."""
