"""Rankers registered by name, and checkpoint save/load that works for every ranker."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from qa_core.rankers.base import Ranker
from qa_core.types import InputError

_REGISTRY: dict[str, type[Ranker]] = {}
CHECKPOINT_FORMAT = 1


def register(cls: type[Ranker]) -> type[Ranker]:
    """Class decorator: make a ranker available by its ``name``."""
    _REGISTRY[cls.name] = cls
    return cls


def _ensure_loaded() -> None:
    # Importing the modules runs their @register decorators.
    from qa_core.rankers import baselines, smcnn  # noqa: F401


def available() -> list[str]:
    _ensure_loaded()
    return sorted(_REGISTRY)


def ranker_class(name: str) -> type[Ranker]:
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown model {name!r}; known models: {', '.join(available())}") from None


def create(name: str, **kwargs: Any) -> Ranker:
    return ranker_class(name)(**kwargs)


def save(ranker: Ranker, path: Path) -> Path:
    """Write a checkpoint atomically: a crash mid-write never leaves a half file at ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": CHECKPOINT_FORMAT, "name": ranker.name, "state": ranker.state()}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(path: Path, map_location: str | None = None) -> Ranker:
    """Rebuild a ranker from a checkpoint; a missing or corrupt file raises ``InputError``."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location=map_location or "cpu", weights_only=False)
        name, state = payload["name"], payload["state"]
    except Exception as exc:  # torch raises many types for a damaged file
        raise InputError(f"checkpoint {path} is corrupt or not a Rerank Lab checkpoint ({exc})") from exc
    return ranker_class(name).from_state(state)
