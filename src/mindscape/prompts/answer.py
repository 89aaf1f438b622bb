"""Try-Answer: the QA agent's attempt, with an explicit "not enough evidence" outcome.

The context is assembled from blocks that the Context switches on: the passages (always),
the signature σ (``answer_with_signature``) and the evidence memory (``answer_with_evidence``).
``task_rules`` is one of :data:`OPEN_RULES`, :data:`CHOICE_RULES`, :data:`CLAIM_RULES`.

Output JSON: ``{"answer": ..., "sufficient": bool, "confidence": 0..1, "evidence_ids": [...]}``.
"""

SYSTEM = (
    "You answer questions about a long story using only the material provided. You are "
    "careful to say when the material does not settle the question."
)

USER = """{signature_block}{memory_block}Passages from the story:
<passages>
{passages}
</passages>

{task_rules}

Question: {question}
{options_block}
Answer with JSON only:
{{"answer": "<your answer>", "sufficient": true or false, "confidence": <0 to 1>, "evidence_ids": ["<ids of the passages you relied on>"]}}
Set "sufficient" to false when the material does not settle the question; still give your
best guess in "answer"."""

SIGNATURE_BLOCK = """What the question brings to mind about the whole story (session summaries):
<signature>
{signature}
</signature>

"""

MEMORY_BLOCK = """What earlier reading established (key findings and their synthesis):
<memory>
{memory}
</memory>

"""

OPEN_RULES = """Task: answer the question with the shortest span that answers it, taken from
the text where possible (a name, a phrase, a short clause). Write numbers in words. No
explanation in "answer"."""

CHOICE_RULES = """Task: choose the one option that the material best supports. Answer with
the option's letter only (for example "B"). Do not rely on outside knowledge."""

CLAIM_RULES = """Task: decide whether the statement (given as the question) is true of the
story. Answer "TRUE" or "FALSE" only. A statement is FALSE if any part of it contradicts the
story."""

OPTION = """{letter}. {text}"""
