"""mindscape.agents."""
