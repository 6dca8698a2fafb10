"""``gpu_check.py make``: the bundle the GPU check reads, written where the whole project is installed
(spaCy, the GloVe package, the registry). See ``benchmarks/gpu_check.py`` for what it holds and why.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.gpu_check import BUNDLE_FORMAT, MANIFEST, POOLS, REQUEST, bundle_bytes, save_part
from qa_core import config
from qa_core.data.demo import load_demo
from qa_core.data.importers import load_wikiqa
from qa_core.rankers import registry
from qa_core.rankers.neural import model_words
from qa_core.text import contextual, nlp
from qa_core.text.vectors import glove_vectors
from qa_core.types import Dataset, InputError, Question

WIKIQA_TRAIN_QUESTIONS = 150  # TRAIN questions of a WikiQA bundle: enough for one epoch's batches, within the size


def neural_rankers() -> list[str]:
    """The registry's rankers that declare a torch network (``capabilities.neural``)."""
    return [name for name in registry.available() if registry.ranker_class(name).capabilities.neural]


def load_data(data: str) -> Dataset:
    if data == "demo":
        return load_demo()
    root = config.shared_data_dir()
    if root is None:
        raise InputError("--data wikiqa needs the shared data folder (../shared/data or RERANK_LAB_SHARED_DATA)")
    return load_wikiqa(root / "wikiqa")


def pools_of(questions: Sequence[Question]) -> list[tuple[str, list[Any]]]:
    return [(q.text, list(q.candidates)) for q in questions]


def pool_record(questions: Sequence[Question]) -> dict[str, Any]:
    """What MAP needs of the pools, in the order their rows are encoded."""
    candidates = [c for q in questions for c in q.candidates]
    return {
        "sizes": torch.tensor([len(q.candidates) for q in questions]),
        "labels": torch.tensor([c.label or 0 for c in candidates]),
        "doc_ids": [c.doc_id for c in candidates],
    }


def ranker_part(name: str, train: list[Question], dev: list[Question], test: list[Question], epochs: int, seed: int) -> dict[str, Any]:
    """Train ``name`` on the CPU, encode TRAIN, DEV and TEST, score TEST; the state is taken last, so its
    vocabulary holds every word the encoded inputs use."""
    ranker = registry.create(name, max_epochs=epochs).to("cpu")
    ranker.fit(train, dev, seed=seed, progress=False)
    labelled = [(q.text, [c for c in q.candidates if c.label is not None]) for q in train]
    pairs = ranker.pool_pairs(labelled)
    inputs, groups, labels = ranker.grouped_examples(list(zip(pairs, [c.label for _, cs in labelled for c in cs])))
    test_inputs = ranker.encode(ranker.pool_pairs(pools_of(test)))
    return {
        "test": {"inputs": test_inputs, "scores": torch.from_numpy(ranker.predict(test_inputs))},
        "dev": {"inputs": ranker.encode(ranker.pool_pairs(pools_of(dev)))},
        "train": {"inputs": inputs, "groups": groups, "labels": labels},
        "state": ranker.state(),
    }


def request_part(test: list[Question]) -> dict[str, Any]:
    """The first TEST question with a relevant and an irrelevant candidate, with everything its request
    path reads besides the checkpoint: parses, spaCy token vectors, and GloVe rows of its words."""
    first_row = 0
    for question in test:
        grades = {(c.label or 0) > 0 for c in question.candidates}
        if grades == {True, False}:
            break
        first_row += len(question.candidates)
    else:
        raise InputError("no TEST question has both a relevant and an irrelevant candidate")
    texts = list(dict.fromkeys([question.text, *(c.text for c in question.candidates)]))
    parses = nlp.parse_many(texts)
    words = list(dict.fromkeys(w for parsed in parses for w in model_words(parsed)))
    return {
        "question": question.text,
        "candidates": [
            {"doc_id": c.doc_id, "text": c.text, "first_stage_rank": c.first_stage_rank, "url": c.url}
            for c in question.candidates
        ],
        "first_row": first_row,
        "parses": {text: nlp.encode(parsed) for text, parsed in zip(texts, parses)},
        "context": {text: torch.from_numpy(rows) for text, rows in zip(texts, contextual.token_vectors(texts))},
        "glove": {word: torch.tensor(row) for word, row in glove_vectors(words).items()},  # copies: a row alone
    }


def make_bundle(bundle: Path, data: str, train_questions: int | None, eval_questions: int | None, epochs: int, seed: int) -> dict[str, Any]:
    """Write the bundle into ``bundle`` (emptied first) and return its manifest; ``InputError`` when it
    comes out over ``gpu_check.MAX_BUNDLE_BYTES``."""
    dataset = load_data(data)
    if train_questions is None:
        train_questions = WIKIQA_TRAIN_QUESTIONS if data == "wikiqa" else len(dataset.split("train"))
    train = random.Random(seed).sample(dataset.split("train"), min(train_questions, len(dataset.split("train"))))
    dev, test = dataset.split("dev")[:eval_questions], dataset.split("test")[:eval_questions]
    if bundle.exists():
        shutil.rmtree(bundle)
    bundle.mkdir(parents=True)
    save_part({"test": pool_record(test), "dev": pool_record(dev)}, bundle / POOLS)
    save_part(request_part(test), bundle / REQUEST)
    entries = []
    for name in neural_rankers():
        cls = registry.ranker_class(name)
        entry = {"name": name, "class": f"{cls.__module__}:{cls.__qualname__}", "file": f"{name}.pt.xz"}
        entry["bytes"] = save_part(ranker_part(name, train, dev, test, epochs, seed), bundle / entry["file"])
        entries.append(entry)
    manifest = {
        "format": BUNDLE_FORMAT,
        "data": data,
        "made": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "seed": seed,
        "epochs": epochs,
        "train_questions": len(train),
        "dev_questions": len(dev),
        "test_questions": len(test),
        "rankers": entries,
    }
    manifest["total_bytes"] = 0
    while manifest["total_bytes"] != bundle_bytes(bundle):  # the manifest counts itself: twice at most
        manifest["total_bytes"] = bundle_bytes(bundle)
        (bundle / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
