"""Figures from committed runs: results.md's generated blocks, the figure check, paired runs,
the README's images."""
