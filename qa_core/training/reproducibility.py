"""Bit-identical training: the settings that make a run repeatable and the record that repeats it.

A training run is repeatable when the seed, the data, the settings, the code, the libraries and
the number of CPU threads are the same: torch's CPU kernels split reductions (matrix products,
convolutions, their gradients) by thread, and a float sum in another order gives other last bits,
which a few hundred optimizer steps grow into other weights and another epoch chosen on DEV. So
every training run fixes its thread count (``training_threads``: ``RERANK_LAB_TRAINING_THREADS``,
default 1, whatever the machine's core count or load) and turns on torch's deterministic
algorithms, and its model version records all of it (``provenance``), so that
``python -m qa_core reproduce`` can train it again and compare.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from qa_core.types import InputError, Question

THREADS_ENV = "RERANK_LAB_TRAINING_THREADS"
DEFAULT_THREADS = 1  # the same on every machine: 1 is the only count every machine has
LIBRARIES = ("torch", "numpy", "spacy", "scikit-learn", "lightgbm", "bm25s", "ir_measures", "ranx")
_REPOSITORY = Path(__file__).resolve().parents[2]


def training_threads() -> int:
    """The CPU threads a training run uses: ``RERANK_LAB_TRAINING_THREADS`` or 1."""
    text = os.environ.get(THREADS_ENV, str(DEFAULT_THREADS))
    if not text.isdigit() or int(text) < 1:
        raise InputError(f"{THREADS_ENV} must be a whole number from 1, got {text!r}")
    return int(text)


@contextmanager
def deterministic(threads: int) -> Iterator[None]:
    """Train inside this: ``threads`` CPU threads and torch's deterministic algorithms (an op
    without a deterministic version warns); the process's settings come back afterwards."""
    import torch  # here: the CLI imports this module for commands that never train

    before = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    cudnn_before = torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic
    # cuBLAS needs a fixed workspace to be deterministic; read when CUDA first initialises.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, True
    try:
        yield
    finally:
        torch.set_num_threads(before[0])
        torch.use_deterministic_algorithms(before[1], warn_only=before[2])
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = cudnn_before


def code_commit() -> str | None:
    """The git commit of the code, with ``+dirty`` when tracked files differ from it (``None``
    outside a git checkout)."""
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(_REPOSITORY), *args], capture_output=True, text=True,
                                  check=True, timeout=30).stdout.strip()
        commit = git("rev-parse", "HEAD")
        return commit + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model() -> str:
    """The CPU's model name (torch's CPU kernels choose vector instructions by CPU)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def library_versions() -> dict[str, str]:
    """Python's and the numeric libraries' versions (those installed)."""
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def data_fingerprint(questions: Sequence[Question]) -> str:
    """SHA-256 of what training reads of these questions, in order: split, qid, texts, doc ids,
    labels, first-stage ranks and URLs (a changed label changes it)."""
    digest = hashlib.sha256()
    for q in questions:
        record = [q.split, q.qid, q.text,
                  [[c.doc_id, c.text, c.label, c.first_stage_rank, c.url] for c in q.candidates]]
        digest.update(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


def provenance(*, seed: int, threads: int, settings: dict[str, Any], device: str, train: Sequence[Question],
               dev: Sequence[Question]) -> dict[str, Any]:
    """What a model version records to be trained again: code, settings, seed, threads, data, libraries."""
    return {
        "code_commit": code_commit(),
        "settings": settings,
        "seed": seed,
        "threads": threads,
        "deterministic_algorithms": True,
        "device": device,
        "cpu": cpu_model(),
        "data_fingerprint": {"train": data_fingerprint(train), "dev": data_fingerprint(dev)},
        "libraries": library_versions(),
    }

