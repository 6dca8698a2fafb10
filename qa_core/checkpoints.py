"""Atomic file writes and the one checkpoint format of every trained model (rankers, classifiers).

A file is written to a temporary sibling, flushed to disk and renamed over the target
(``os.replace``), so a crash or a killed training run leaves the old file or the complete new one,
never a truncated file that a later load or evaluation would read.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from qa_core.types import InputError

CHECKPOINT_FORMAT = 1


@contextmanager
def atomic_file(path: str | Path, mode: str = "wb", **open_kwargs: Any) -> Iterator[IO[Any]]:
    """A handle on a temporary file beside ``path`` that replaces ``path`` when the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, **open_kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def save_checkpoint(kind: str, state: dict[str, Any], path: str | Path) -> Path:
    """Write ``{"format", "kind", "state"}`` atomically; ``kind`` says which class can load it."""
    import torch  # here, not at the top: exporters use ``atomic_file`` without loading torch

    with atomic_file(path) as handle:
        torch.save({"format": CHECKPOINT_FORMAT, "kind": kind, "state": state}, handle)
    return Path(path)


def load_checkpoint(path: str | Path) -> tuple[str, dict[str, Any]]:
    """``(kind, state)`` of a checkpoint, on the CPU; a missing or damaged file raises ``InputError``.

    ``weights_only=False`` because states hold vocabularies and configs besides tensors: load only
    checkpoints this installation wrote (the store records where they are).
    """
    import torch

    path = Path(path)
    if not path.is_file():
        raise InputError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
        return str(payload["kind"]), payload["state"]
    except Exception as exc:  # torch and pickle raise many types for a damaged file
        raise InputError(f"checkpoint {path} is corrupt or not a Rerank Lab checkpoint ({exc})") from exc
