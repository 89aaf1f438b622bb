"""Mem-Encode (ComoRAG's Comprehension Agent), optionally with Mem-Fuse in the same call.

One call covers any number of evidence blocks (one per probe and layer): the batched mode
sends all of a round's blocks at once; ComoRAG's per-layer mode sends one block per call.
When ``fuse_rule`` is :data:`FUSE_RULE`, the same call also integrates the earlier findings
(the most question-related half of the memory pool) with the new ones.

Output JSON: ``{"cues": [{"block": "b1", "findings": "..."}], "fused": "..."}``.
"""

from mindscape.prompts import DATA_RULE

SYSTEM = (
    "You are a close reader of long stories. You read retrieved excerpts and write down, "
    "briefly and faithfully, what they reveal that helps answer a question."
) + DATA_RULE

USER = """Question: {question}

Below are evidence blocks. Each block holds excerpts that one search (the "probe") found in
one layer of the story's memory: "veridical" = original text, "semantic" = thematic
summaries, "episodic" = timeline summaries, "outline" = section outline.

{blocks}

Earlier findings from previous rounds:
<memory>
{memory}
</memory>

For every block, write its key findings for the question: at most five short points naming
the people, objects, places, times and causes involved, what supports them, and any detail
that settles an ambiguity. Use only what the excerpts say; if a block has nothing useful,
write "nothing relevant".
{fuse_rule}
Answer with JSON only, in this shape:
{{"cues": [{{"block": "<block id>", "findings": "<key findings>"}}], "fused": "<integrated summary or empty>"}}"""

FUSE_RULE = """Then write "fused": one coherent summary that integrates the earlier findings
with the new ones, oriented towards answering the question (what is now known, what is
still missing)."""

NO_FUSE_RULE = """Leave "fused" empty."""

BLOCK = """<block id="{block_id}" layer="{layer}" probe="{probe}">
{passages}
</block>"""

PASSAGE = """<evidence id="{unit_id}">{text}</evidence>"""
