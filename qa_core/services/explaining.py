"""Which explainer a page shows for a model: the explainers the model offers
(``qa_core.explain.explainers``, by its declared capabilities), the default chosen on DEV by
``benchmarks/faithfulness.py`` (``qa_core.explain.defaults``'s rule, stored in its DEV results), and
titles for a picker."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from qa_core import config
from qa_core.explain import explainers
from qa_core.rankers.base import Ranker

DEV_RESULTS = config.PROJECT_ROOT / "benchmarks" / "results" / "faithfulness_dev.json"


@cache
def dev_results(path: Path = DEV_RESULTS) -> dict[str, Any]:
    """The stored DEV faithfulness of every explainer (empty before the benchmark ran)."""
    return json.loads(path.read_text()) if path.is_file() else {}


def default_explainer(ranker: Ranker, path: Path = DEV_RESULTS) -> str:
    """The model's default explainer from the stored DEV choice; its own weights (the first it
    offers) when it was not measured (or the stored choice is one it does not offer)."""
    chosen = dev_results(path).get("defaults", {}).get(ranker.name)
    offered = explainers.available(ranker.capabilities)
    return chosen if chosen in offered else offered[0]


def choices(ranker: Ranker, path: Path = DEV_RESULTS) -> dict[str, str]:
    """``{explainer: title}`` of what the model offers, the default first and said to be one."""
    default = default_explainer(ranker, path)
    measured = ranker.name in dev_results(path).get("defaults", {})
    note = " (default, best on DEV)" if measured else " (default: not measured on DEV)"
    names = [default, *(n for n in explainers.available(ranker.capabilities) if n != default)]
    return {n: explainers.EXPLAINERS[n].title + (note if n == default else "") for n in names}
