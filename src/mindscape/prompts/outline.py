"""Index-time MoM document memory: outline, core content and atomic chunks of a section."""

from mindscape.prompts import DATA_RULE

SYSTEM = (
    "You are a domain expert in literature who reads a section of a long narrative and "
    "organises it into a structured document memory."
) + DATA_RULE

USER = """Read the section below (titled "{title}") and organise it into outline items.
For each item give:
- "title": a short descriptive title of that part of the section;
- "core": its core content in 1-3 sentences (the events, characters and facts that matter);
- "chunks": the consecutive spans of the section that belong to the item. Give each span as an
  anchor: "head" = its first 6-10 words and "tail" = its last 6-10 words, copied exactly from
  the text (the middle is left out, as in head ... [MASK] ... tail).
Use between 1 and {max_items} items, in the order of the text, covering the whole section.
Return only JSON: {{"items": [{{"title": "...", "core": "...", "chunks": [{{"head": "...", "tail": "..."}}]}}]}}

<section>
{section}
</section>"""
