"""Self-Probe (ComoRAG's Regulation Agent) together with the REFINE/ANSWER decision.

One call reads the failed attempt and the memory, decides whether to answer now after all,
and otherwise proposes at most ``max_probes`` new probes: concrete entities first
(characters, objects, places, events not yet probed), then relations between them; never
a repeat. With ``rewrite_rule`` = :data:`REWRITE_RULE` it also rewrites the retrieval query.

Output JSON: ``{"decision": "REFINE"|"ANSWER", "probes": [...], "next_query": "...", "reason": "..."}``.
"""

from mindscape.prompts import DATA_RULE

SYSTEM = (
    "You direct the search through a long story's memory. When an answer attempt falls "
    "short, you decide what to look up next."
) + DATA_RULE

USER = """Question: {question}
Current search query: {query}

Latest answer attempt: {attempt}

Passages read in this round (excerpts):
<passages>
{passages}
</passages>

What has been found so far:
<memory>
{memory}
</memory>

Probes already used (do not repeat them or close variants):
<previous>
{previous}
</previous>

Decide:
- "ANSWER" if the attempt is already supported well enough by what has been found;
- otherwise "REFINE" and propose up to {max_probes} new probes, each a short search query.
  Cover concrete things first: characters, objects, places or events that bear on the
  question and have not been probed yet; then the relations between them. Avoid abstract
  themes. With no previous probes, start with the main entity of the question, then a
  related secondary entity, then background context.
{rewrite_rule}
Answer with JSON only:
{{"decision": "REFINE" or "ANSWER", "probes": ["<probe>", ...], "next_query": "<query or empty>", "reason": "<one sentence>"}}"""

REWRITE_RULE = """Also write "next_query": the retrieval query for the next round, rewritten to
target what is still missing (keep it about the original question)."""

NO_REWRITE_RULE = """Leave "next_query" empty."""
