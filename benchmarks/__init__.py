"""Scripts that print measured figures, grouped by what they measure; common.py is what they share.

Run one from the repository root as ``python benchmarks/GROUP/SCRIPT.py --help``.
"""
