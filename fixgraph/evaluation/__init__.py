"""Evaluation: questions, gold mapping, metrics, statistics and reports."""
