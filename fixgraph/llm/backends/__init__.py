"""LLM backends; importing this package registers every one of them in `LLMS`.

Heavy libraries (httpx, llama_cpp, transformers) are imported inside the backends, on first use.
"""

from fixgraph.llm.backends import llamacpp, ollama, openai_compat, transformers_local  # noqa: F401
