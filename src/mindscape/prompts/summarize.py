"""Index-time summaries: episodic sessions (timeline windows) and semantic clusters."""

from mindscape.prompts import DATA_RULE

SYSTEM = (
    "You are a careful literary analyst who summarises passages of a long narrative." + DATA_RULE
)

SESSION = """Summarise the following consecutive passages of a story in at most {max_words} words.
Keep the chronological order. Name the characters, places and objects involved, and state the
key events and turning points with their concrete details. Do not add anything that is not in
the passages. Write plain prose, no headings.

<passages>
{passages}
</passages>

Summary:"""

CLUSTER = """The following passages of a story are related by theme, characters or events.
Write one summary of them in at most {max_words} words that keeps as many key details as
possible: who, what, where, and how they connect. Do not add anything that is not in the
passages. Write plain prose, no headings.

<passages>
{passages}
</passages>

Summary:"""
