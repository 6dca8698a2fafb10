"""The bundled demo corpus, so the app, CLI and tests work offline without the benchmark data.

40 hand-written factoid questions (24 train, 8 dev, 8 test), each with 6-7 candidate sentences:
one or two answers and distractors that share the question's words, so that word overlap and BM25
are imperfect and a learned ranker has something to learn.
"""

from __future__ import annotations

from pathlib import Path

from qa_core.data.importers import load_pairs
from qa_core.types import Dataset

DEMO_PATH = Path(__file__).resolve().parent / "demo_corpus.jsonl"
DEMO_NAME = "demo"


def load_demo() -> Dataset:
    """The demo corpus as the dataset "demo" (read through ``load_pairs``, like any user JSONL file)."""
    return load_pairs(DEMO_PATH, name=DEMO_NAME)
