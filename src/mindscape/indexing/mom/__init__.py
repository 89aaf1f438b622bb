"""MoM (Mixtures of scenario-aware document Memories): outlines, candidate memories, export.

:mod:`.outline` holds a document memory's outline items, their core content and the chunks
they cover; :mod:`.paths` writes N candidate memories of a section and :mod:`.select` chooses
among them (chunk clarity, core completeness, reciprocal rank fusion); :mod:`.export` writes
each document with its chosen memory as chat-format training data (``mindscape mom export``).
The outline layer's builder is :mod:`mindscape.indexing.outline`.
"""
