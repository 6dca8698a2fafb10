"""The bundled demo corpus, so the app, CLI and tests work offline without the benchmark data.

195 hand-written factoid questions (139 train, 28 dev, 28 test; 1,320 pairs), each with 5-9
candidate sentences: one or two answers and distractors that share the question's words and often
its answer type (another person who discovered something else, the year without the person), so
that word overlap and BM25 are imperfect and a learned ranker has something to learn. Many ask who
discovered, invented, wrote, painted or composed something. Each TRAIN question from demo-41 on also
lists, as wrong answers, the two TRAIN answers of other questions that BM25 ranks highest for it
(none used more than twice): Ask reranks exactly such pools, and without them SM-CNN learns which
sentences are answers rather than which answer a question. ``benchmarks/demo.py`` measures what
``make run``'s SM-CNN does with a typed "which scientist discovered penicillin" and with the DEV and
TEST questions typed alike.
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
