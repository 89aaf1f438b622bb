"""Indexing: what gets indexed and how a book becomes the store's layers.

The sources (:mod:`.sources`: a file, a folder, a library), the builders of each layer
(:mod:`.chunking`, :mod:`.episodic`, :mod:`.raptor`, :mod:`.outline` with MoM's document
memories in :mod:`.mom`, :mod:`.triples`), the embeddings they cache (:mod:`.embed_cache`),
the indexer that runs them (:mod:`.indexer`) and the writer that stores a built document
(:mod:`.writer`); a library of books built on Ray (:mod:`.library`) and what an index or an
eval would cost before running it (:mod:`.estimate`). Query time reads what these wrote
through :mod:`mindscape.memory`; nothing here runs at query time.
"""
