"""mindscape.eval."""
