"""Index-time triple extraction for the veridical layer (HippoRAG-style open IE)."""

from mindscape.prompts import DATA_RULE

SYSTEM = "You extract factual relations from narrative text as JSON." + DATA_RULE

USER = """Extract the facts stated in the passage as subject-relation-object triples.
Use the characters', places' and objects' names (resolve pronouns to names when the passage
makes clear who is meant). Keep relations short (a verb phrase). At most {max_triples} triples.
Return only JSON: {{"triples": [["subject", "relation", "object"], ...]}}

<passage>
{passage}
</passage>"""
