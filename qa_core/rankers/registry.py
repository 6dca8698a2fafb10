"""Rankers by name, and checkpoints that work for every ranker.

The registry imports every module of ``qa_core.rankers`` once and registers the concrete ``Ranker``
subclasses with a ``name`` that each module defines: no hand-kept list, and no ranker module imports
this one, so there is no import cycle. Rankers of other installed packages come in through the
``rerank_lab_rankers`` entry point (catalogue, as spaCy's registries).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from functools import cache
from pathlib import Path
from typing import Any

import catalogue

from qa_core.checkpoints import Registration, load_checkpoint, rebuild, save_checkpoint
from qa_core.rankers.base import Ranker
from qa_core.types import InputError

RANKERS = catalogue.create("rerank_lab", "rankers", entry_points=True)


@cache
def _discover() -> None:
    """Register every model the modules of this package define (once per process)."""
    package = importlib.import_module("qa_core.rankers")
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for cls in vars(module).values():
            defined_here = inspect.isclass(cls) and cls.__module__ == module.__name__
            if defined_here and issubclass(cls, Ranker) and "name" in cls.__dict__ and not inspect.isabstract(cls):
                known = RANKERS.get_all().get(cls.name)
                if known is not None and known is not cls:
                    raise ValueError(f"two rankers are named {cls.name!r}: {known} and {cls}")
                # The same class again: an earlier discovery was cut short (a Streamlit rerun that stops
                # the script while the models import) and is finished now.
                RANKERS.register(cls.name, func=cls)


def _classes() -> dict[str, type[Ranker]]:
    _discover()
    return RANKERS.get_all()


def available() -> list[str]:
    """Every registered ranker name, sorted."""
    return sorted(_classes())


def ranker_class(name: str) -> type[Ranker]:
    classes = _classes()
    if name not in classes:
        raise InputError(f"unknown model {name!r}; known models: {', '.join(sorted(classes))}")
    return classes[name]


def trainable() -> list[str]:
    """The names of the rankers that learn from labels."""
    return [name for name in available() if ranker_class(name).capabilities.trainable]


def create(name: str, **settings: Any) -> Ranker:
    """A new ranker with its default config changed by ``settings`` (``InputError`` on unknown ones)."""
    cls = ranker_class(name)
    return cls(cls.configure(**settings))


def save(ranker: Ranker, path: Path) -> Path:
    """Write the ranker's checkpoint atomically (see ``qa_core.checkpoints``)."""
    return save_checkpoint(ranker.name, ranker.state(), path)


def load(path: Path, registration: Registration | None = None) -> Ranker:
    """Rebuild a ranker from a checkpoint; a missing, corrupt, foreign or unfitting file raises
    ``InputError``, as does one that is not what the store registered (``registration``)."""
    kind, state = load_checkpoint(path, registration)
    if kind not in _classes():
        raise InputError(f"checkpoint {path} holds a {kind!r} model, which is not a ranker")
    return rebuild(path, kind, ranker_class(kind).from_state, state)


def models_table() -> str:
    """The README's model table (markdown), from the registry: name, model, what ``explain`` shows."""
    lines = ["| name | model | trains | `explain` fills | reads besides the texts |", "|---|---|---|---|---|"]
    for name in available():
        cls = ranker_class(name)
        caps = cls.capabilities
        trains = "yes" if caps.trainable else ("statistics" if caps.learns_statistics else "no")
        explains = ", ".join(sorted(caps.explains))
        reads = ", ".join(sorted(caps.reads)) or "-"
        lines.append(f"| `{name}` | {cls.title} | {trains} | {explains} | {reads} |")
    return "\n".join(lines)


# The README's generated table stands between these two comment lines.
TABLE_MARKERS = re.compile(r"(<!-- models:[^\n]*-->\n)(.*?)(\n<!-- /models -->)", re.S)


def with_models_table(text: str, where: str = "README.md") -> str:
    """``text`` with the model table between its markers (``TABLE_MARKERS``) replaced by
    ``models_table()``, the rest untouched; ``InputError`` naming ``where`` without the markers."""
    if TABLE_MARKERS.search(text) is None:
        raise InputError(f"{where} has no model table markers (<!-- models: ... --> and <!-- /models -->)")
    return TABLE_MARKERS.sub(lambda match: match.group(1) + models_table() + match.group(3), text, count=1)
