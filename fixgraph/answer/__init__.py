"""Grounded answering: cited answers, claim verification, LLM judging and question generation."""
