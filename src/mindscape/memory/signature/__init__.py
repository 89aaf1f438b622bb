"""The MiA signature σ: what a query activates, and the few session summaries that stand for it.

:mod:`.activation` is MiA's E1 (what the query alone lights up), :mod:`.select` chooses σ over
an index (coverage-aware greedy or First-K), :mod:`.sigma` builds and updates the signature
the agent carries, and :mod:`.conditioning` scores units against the query and σ together
with MiA's α gate.
"""
