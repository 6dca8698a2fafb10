"""Rankers registered by name, and checkpoint save/load that works for every ranker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qa_core.checkpoints import load_checkpoint, save_checkpoint
from qa_core.rankers.base import Ranker
from qa_core.types import InputError

_REGISTRY: dict[str, type[Ranker]] = {}


def register(cls: type[Ranker]) -> type[Ranker]:
    """Class decorator: make a ranker available by its ``name``."""
    _REGISTRY[cls.name] = cls
    return cls


def _ensure_loaded() -> None:
    # Importing the modules runs their @register decorators.
    from qa_core.rankers import (  # noqa: F401
        attention_lstm,
        baselines,
        cnn_overlap,
        compare_aggregate,
        global_local,
        mphcnn,
        smcnn,
        tree_kernel,
    )


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
    """Write the ranker's checkpoint atomically (see ``qa_core.checkpoints``)."""
    return save_checkpoint(ranker.name, ranker.state(), path)


def load(path: Path) -> Ranker:
    """Rebuild a ranker from a checkpoint; a missing, corrupt or foreign file raises ``InputError``."""
    kind, state = load_checkpoint(path)
    if kind not in available():
        raise InputError(f"checkpoint {path} holds a {kind!r} model, which is not a ranker")
    return ranker_class(kind).from_state(state)
