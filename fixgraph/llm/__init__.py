"""LLM layer: one client interface, backends behind the `llm` registry."""
