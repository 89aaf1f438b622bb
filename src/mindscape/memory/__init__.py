"""mindscape.memory."""
