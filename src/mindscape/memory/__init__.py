"""The layered memory: the store and its types here, the rest by concept.

* :mod:`.store` (Chroma collections per layer and the index cache), :mod:`.types` (units,
  hits, signature units), :mod:`.settings` (retrieval and signature settings),
  :mod:`.cache` and :mod:`.embed_cache`: what every part reaches;
* :mod:`.build`: the layers' builders (chunks, ComoRAG's sessions, RAPTOR's tree, MoM's
  outline, triples) and the indexer that runs them;
* :mod:`.retrieval`: ComoRAG's tri-layer retrieval, MoM's late fusion, RAPTOR's collapsed tree;
* :mod:`.signature`: the MiA signature (activation, selection, σ-conditioned scoring);
* :mod:`.mom`: MoM's document memories, their candidates and the CoM export.
"""
