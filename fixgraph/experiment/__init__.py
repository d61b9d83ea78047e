"""Experiment stage: pipeline stage entry points (CLI and DVC), tracking and reports."""
