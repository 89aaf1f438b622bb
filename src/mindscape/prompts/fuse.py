"""Mem-Fuse (ComoRAG's Integration Agent) as its own call: the per-layer (ComoRAG) mode.

The units given are the most question-related part of the memory pool (ComoRAG: the top
half by similarity of probe + cue to the question). The answer is plain text.
"""

from mindscape.prompts import DATA_RULE

SYSTEM = (
    "You combine notes gathered while investigating a story into one clear account that "
    "serves a specific question."
) + DATA_RULE

USER = """Question: {question}

Notes gathered so far, each from one probe of the story's memory:
<notes>
{notes}
</notes>

Integrate these notes into one coherent summary aimed at answering the question: keep the
concrete facts (names, events, order, causes), reconcile notes that agree, point out
contradictions, and say what is still unknown. Do not invent facts. At most {max_words} words.

Summary:"""

NOTE = """- probe: {probe} | layer: {layer} | finding: {cue}"""
