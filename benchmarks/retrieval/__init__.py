"""Recall@k of retrieval on story pools, its variants, and a library of books on Ray."""
