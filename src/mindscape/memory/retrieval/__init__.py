"""Retrieving from the layered memory: ComoRAG's tri-layer retrieval and MoM's late fusion.

:mod:`.retriever` is the one retriever the agent and the benchmarks use (its interface,
:class:`~.protocol.MemoryRetriever`, is what the agent depends on); :mod:`.ranking` combines
ranked lists and fits evidence into a budget,
:mod:`.late_fusion` is MoM's rank-then-fuse over layers and :mod:`.raptor_collapse` RAPTOR's
collapsed tree. How a query is conditioned on the signature lives in
:mod:`mindscape.memory.signature`, which this package calls once per query and which never
calls back; both read one document set's arrays from :mod:`mindscape.memory.scope`.
"""
