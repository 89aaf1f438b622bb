"""mindscape: question answering over very long narratives.

A layered memory of a book (veridical chunks, episodic session summaries, a semantic
cluster tree and a MoM outline) and a LangGraph agent that answers questions over it.
Nothing heavy is imported here: models load on first use.
"""

__version__ = "0.1.0"
