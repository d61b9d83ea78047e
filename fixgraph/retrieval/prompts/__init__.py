"""Versioned prompt files of retrieval (document expansion, query rewriting, LLM reranking); see
fixgraph.llm.prompts."""

from __future__ import annotations

from pathlib import Path

from fixgraph.llm.prompts import PromptFolder

PROMPTS = PromptFolder(Path(__file__).resolve().parent)
load_prompt = PROMPTS.load
prompt_names = PROMPTS.names
