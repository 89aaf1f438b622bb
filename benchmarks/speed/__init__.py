"""Seconds, memory and LLM calls: retrieval latency, indexing memory, the warm ask, chat and MCP."""
