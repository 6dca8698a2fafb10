"""Structural representations for tree-kernel rerankers: shallow trees, REL tagging, tree kernels.

Names are imported lazily: ``kernels`` alone needs numpy and numba, while ``rel`` pulls in spaCy.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Tree": "trees",
    "ShallowTree": "trees",
    "build_shallow_tree": "trees",
    "RelTagged": "rel",
    "FocusAndClass": "rel",
    "rel_tag": "rel",
    "analyze": "rel",
    "heuristic_focus_and_class": "rel",
    "Forest": "kernels",
    "KernelParams": "kernels",
    "stk": "kernels",
    "ptk": "kernels",
    "tree_kernel": "kernels",
    "gram_matrix": "kernels",
    "prune_tree": "pruning",
    "token_weights": "pruning",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
