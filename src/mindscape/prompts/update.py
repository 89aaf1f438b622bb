"""MiA-Agent's UPDATE: one call that refines (decision, query, signature, evidence).

The signature is a small set of session summaries that works as a compass for the whole
story; the passages are what the signature-guided search just found; the evidence memory is
the running list of grounded notes. The model keeps or swaps signature entries among the
current ones and the candidates, appends new notes that cite passage ids, and decides
whether to answer now or search again (with a rewritten query when allowed).

Output JSON: ``{"decision", "next_query", "signature": [ids], "evidence": [{"note", "ids"}], "reason"}``.
"""

from mindscape.prompts import DATA_RULE

SYSTEM = (
    "You manage the working memory of an agent that answers questions about a long story. "
    "You keep a compact global picture (the signature) and grounded notes (the evidence), "
    "and decide when the agent knows enough to answer."
) + DATA_RULE

USER = """Original question: {question}
Current search query: {query}

Current signature (session summaries that frame the search):
<signature>
{signature}
</signature>

Candidate summaries that the new evidence points to:
<candidates>
{candidates}
</candidates>

Passages just retrieved:
<passages>
{passages}
</passages>

Evidence memory so far:
<memory>
{memory}
</memory>

Update the state:
1. "signature": the ids of at most {k} summaries (from the current signature and the
   candidates) that best frame where the answer lies in the story.
2. "evidence": new notes that matter for the question, each a short grounded statement with
   the ids of the passages it rests on. Do not repeat notes already in memory.
3. "decision": "ANSWER" if the memory and passages now support an answer with good
   confidence; "REFINE" if key evidence is missing, conflicting or uncertain.
{rewrite_rule}
Answer with JSON only:
{{"decision": "REFINE" or "ANSWER", "next_query": "<query or empty>", "signature": ["<id>", ...], "evidence": [{{"note": "<note>", "ids": ["<passage id>"]}}], "reason": "<one sentence>"}}"""

REWRITE_RULE = """4. "next_query": when you decide REFINE, a search query aimed at the missing
   evidence (the signature keeps the global context, so stay specific)."""

NO_REWRITE_RULE = """4. Leave "next_query" empty: the query stays fixed."""

ITEM = """<summary id="{unit_id}">{text}</summary>"""
