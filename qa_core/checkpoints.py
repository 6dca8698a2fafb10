"""Atomic file writes and the one checkpoint format of every trained model (rankers, classifiers).

A file is written to a temporary sibling, flushed to disk and renamed over the target
(``os.replace``), so a crash or a killed training run leaves the old file or the complete new one,
never a truncated file that a later load or evaluation would read.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

from qa_core.types import InputError

CHECKPOINT_FORMAT = 1
T = TypeVar("T")


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
    """``(kind, state)`` of a checkpoint, on the CPU; a missing, damaged, foreign or unsafe file
    raises ``InputError``.

    ``weights_only=True``: only tensors and plain data (dicts, lists, tuples, strings, numbers) are
    unpickled, so a file crafted to run code, or holding objects of another program, is refused
    before anything in it runs. Every state this project writes is plain data (vocabularies as
    lists, configs as dicts, arrays as tensors), including files written before this check.
    """
    import torch

    path = Path(path)
    if path.is_dir():
        raise InputError(f"checkpoint {path} is a folder, not a file")
    if not path.is_file():
        raise InputError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "GLOBAL" in str(exc):  # the weights-only unpickler met a class or function reference
            raise InputError(
                f"checkpoint {path} was refused: it holds Python objects other than tensors and plain data "
                "(a file from elsewhere, or made to run code); nothing in it was loaded or run"
            ) from None
        raise InputError(f"checkpoint {path} is corrupt or not a Rerank Lab checkpoint (unreadable pickle)") from None
    except Exception as exc:  # torch and zipfile raise many types for a damaged file
        raise InputError(f"checkpoint {path} is corrupt or not a Rerank Lab checkpoint ({type(exc).__name__})") from None
    if not (
        isinstance(payload, dict)
        and payload.get("format") == CHECKPOINT_FORMAT
        and isinstance(payload.get("kind"), str)
        and isinstance(payload.get("state"), dict)
    ):
        raise InputError(
            f"checkpoint {path} is not a Rerank Lab checkpoint (expected format {CHECKPOINT_FORMAT} with a kind and a state)"
        )
    return payload["kind"], payload["state"]


def rebuild(path: str | Path, kind: str, from_state: Callable[[dict[str, Any]], T], state: dict[str, Any]) -> T:
    """``from_state(state)``, with a state that does not fit the model's current code (a field
    missing or unknown, tensors of another shape, wrong types) turned into ``InputError``, so a
    caller falls back to another version as it does for a damaged file."""
    try:
        return from_state(state)
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as exc:
        detail = " ".join(str(exc).split())
        detail = f"{type(exc).__name__}: {detail[:200]}{'…' if len(detail) > 200 else ''}"
        raise InputError(
            f"checkpoint {path} does not fit this version's {kind!r} model ({detail}); retrain it or use another version"
        ) from None
