"""mindscape.graphs."""
