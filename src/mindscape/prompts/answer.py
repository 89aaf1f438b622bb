"""Try-Answer: the QA agent's attempt, with an explicit "not enough evidence" outcome.

The context is assembled from blocks that the Context switches on: the passages (always),
the signature σ (``answer_with_signature``) and the evidence memory (``answer_with_evidence``).
``task_rules`` is one of :data:`OPEN_RULES`, :data:`CHOICE_RULES`, :data:`CLAIM_RULES`.

The model first copies the sentence that answers the question (``quote``), then answers:
pointing at the evidence before answering keeps a small model on the passage that holds the
answer, and lets the reasoner check the quote against the passages, so the loop never ends
on the model's self-reported certainty alone.

Output JSON: ``{"quote": ..., "answer": ..., "sufficient": bool}``.
"""

from mindscape.prompts import DATA_RULE

SYSTEM = (
    "You answer questions about a long story using only the material provided. You are "
    "careful to say when the material does not settle the question."
) + DATA_RULE

USER = """{signature_block}{memory_block}Passages from the story:
<passages>
{passages}
</passages>

{task_rules}

Question: {question}
{options_block}
Answer with JSON only:
{{"quote": "<the sentence from the passages that answers the question, copied word for word>", "answer": "<your answer>", "sufficient": true or false}}
Copy the quote exactly from one passage. Set "sufficient" to false when no passage settles
the question; still give your best guess in "answer"."""

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

# ---- the plain prompt: a small local model reads one focused passage and replies in words.
# Measured with the 1.5B model: 7 of 9 Cinderella questions right from a 330-600-token passage
# with this kind of prompt, 0 of 4 from 1.2-3K tokens of chunks under the JSON prompt above.

PLAIN_SYSTEM = (
    "You answer questions about a story using only the passage you are given."
) + DATA_RULE

PLAIN_USER = """Passage from the story:
<passages>
{passages}
</passages>

Question: {question}
{options_block}{rules}"""

NOT_STATED = "not stated"
"""A reply that says the passage does not answer (the model volunteers such replies; asked
for one, the 1.5B model gave it to 6 of 16 FairytaleQA dev questions, most of them answerable
from what it read, so the prompt does not offer it: the grounding checks judge the answer)."""

PLAIN_OPEN = "Use only the passage. Reply with a short answer of a few words."

PLAIN_CHOICE = "Use only the passage. Reply with the letter of the best option only."

PLAIN_CLAIM = (
    "Use only the passage. Reply TRUE if the statement is true of the story, FALSE if any "
    "part of it is false."
)

# ---- worked examples for the plain prompt (mindscape.reasoners.demos): in the system message,
# so every question's prompt starts the same and llama.cpp reuses the cached prefix.

DEMO_SYSTEM = """{system}

Examples of questions answered from a passage, each with a short answer taken from the
passage's own words:

{demos}"""

DEMO = """<passage>
{passage}
</passage>
Question: {question}
Answer: {answer}"""
