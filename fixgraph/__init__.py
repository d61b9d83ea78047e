"""fixgraph: a declarative experiment runner for GraphRAG troubleshooting assistants."""

__version__ = "0.1.0"
