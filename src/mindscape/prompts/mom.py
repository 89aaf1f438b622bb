"""MoM beyond the outline: the evaluator's two questions, and the CoM export's prompts.

``BREAK`` and ``CORE`` are read by the evaluator model that chooses among candidate memories
(:mod:`mindscape.indexing.mom.paths`): the probability of "yes" to ``BREAK`` is chunk clarity's
break probability, and the perplexity of an atomic chunk after ``CORE`` is core completeness's
PPL(a | c). ``REVERSE_*`` ask the model to reconstruct the expert's reasoning from a document
and its chosen memory, and ``MEMREADER_SYSTEM`` is the instruction a MemReader is trained
under (:mod:`mindscape.indexing.mom.export`).
"""

from mindscape.prompts import DATA_RULE

BREAK = """Two consecutive passages of a story follow. Is the boundary between them a real \
break: does the second passage begin a new part of the story (a new scene, event or topic)?

<passage id="1">
{first}
</passage>

<passage id="2">
{second}
</passage>

Answer with one word: yes or no."""

CORE = "Core content of the passage that follows: {core}\n\nPassage:\n"

REVERSE_SYSTEM = (
    "You are a domain expert in literature who explains how an expert reader turns a "
    "narrative into a structured document memory."
) + DATA_RULE

REVERSE_USER = """Below are a document and the memory an expert extracted from it: outline \
items, each with its core content and the spans of text ("chunks", given by their first and \
last words) that belong to it.

Write the reasoning that leads from the document to this memory, in the first person, as the \
expert thinking before writing it: what kind of text this is and what matters in it, where \
each part begins and ends and why, and what each part's core content keeps. Do not say that \
the memory was given to you and do not repeat it as JSON. Plain prose, at most {max_words} \
words.

<passages>
{document}
</passages>

<memory>
{memory}
</memory>"""

MEMREADER_SYSTEM = (
    "You are a domain expert in literature who reads a narrative and organises it into a "
    "structured document memory. First think through the text's structure in prose; then "
    'return the memory as JSON: {"items": [{"title": "...", "core": "...", "chunks": '
    '[{"head": "...", "tail": "..."}]}]}, one item per part of the text in order, "core" '
    "its core content in 1-3 sentences, and each chunk a span of the text given by its "
    'first words ("head") and last words ("tail"), copied exactly.'
)
