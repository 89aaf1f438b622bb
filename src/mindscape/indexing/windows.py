"""Episodic/session windows: non-overlapping runs of consecutive chunks, in source order.

Long documents use MiA's W (20 chunks by default). Short ones use ComoRAG's timeline rule,
which shrinks the window so even a short story gets several sessions:
N ≤ 5 → 2, ≤ 20 → 3, ≤ 50 → 5, ≤ 100 → 8, ≤ 200 → 10, else `W`.
"""

from __future__ import annotations

__all__ = [
    "window_size",
    "windows",
]


def window_size(n_chunks: int, w: int = 20) -> int:
    """Chunks per session window for a document of `n_chunks` chunks (never above `w`)."""
    for limit, size in ((5, 2), (20, 3), (50, 5), (100, 8), (200, 10)):
        if n_chunks <= limit:
            return max(1, min(size, w))
    return max(1, w)


def windows(n_chunks: int, w: int = 20) -> list[range]:
    """The windows as ranges of chunk indices, covering every chunk exactly once."""
    size = window_size(n_chunks, w)
    return [range(s, min(s + size, n_chunks)) for s in range(0, n_chunks, size)]
