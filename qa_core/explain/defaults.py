"""The default explainer of each model: the one with the best faithfulness on DEV, by a rule fixed
before the DEV run (docs/benchmarks.md, "Default explainers") and applied here to the stored DEV
results of ``benchmarks/faithfulness.py --split dev``.

The rule. For each model and explainer, on each dataset's DEV sample and each fraction k:

- margin = ((comprehensiveness - random comprehensiveness) + (random sufficiency - sufficiency)) / 2,
  as a share of the model's score range on those pairs (both terms: higher is better);
- the explainer's DEV score is the mean margin over the datasets and fractions;
- it qualifies when it beats random words (comprehensiveness and sufficiency, p < 0.01, every k)
  on every DEV dataset measured.

The default is the qualifying explainer with the highest DEV score; when none qualifies, the one
with the highest DEV score. Equal scores go to the earlier explainer of
``qa_core.explain.explainers.EXPLAINERS`` (the model's own weights first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qa_core.explain.explainers import EXPLAINERS

Entry = Mapping[str, Any]  # a benchmark entry: "summaries" (one per k) and "beats_random"


def margin(summary: Mapping[str, Any]) -> float:
    """One fraction's margin over random words as a share of the score range (0 for a flat range)."""
    if not summary["score_range"]:
        return 0.0
    comp = summary["comprehensiveness"] - summary["random_comprehensiveness"]
    suff = summary["random_sufficiency"] - summary["sufficiency"]
    return (comp + suff) / 2 / summary["score_range"]


def dev_score(entries: list[Entry]) -> float:
    """Mean margin over the datasets' entries of one explainer and all their fractions."""
    margins = [margin(s) for entry in entries for s in entry["summaries"]]
    return sum(margins) / len(margins) if margins else float("-inf")


def choose_default(by_dataset: Mapping[str, Mapping[str, Entry]]) -> str:
    """The default explainer of one model from its DEV entries, ``{dataset: {explainer: entry}}``."""
    names = [name for name in EXPLAINERS if any(name in entries for entries in by_dataset.values())]
    if not names:
        raise ValueError("no DEV results to choose an explainer from")
    measured = {name: [entries[name] for entries in by_dataset.values() if name in entries] for name in names}
    qualifying = [n for n in names if all(entry["beats_random"] for entry in measured[n])]
    pool = qualifying or names
    return max(pool, key=lambda n: (dev_score(measured[n]), -names.index(n)))


def defaults(dev_results: Mapping[str, Any]) -> dict[str, str]:
    """The default explainer of every model measured on every DEV dataset of the stored results
    (``{"datasets": {dataset: {"models": {model: {"explainers": {explainer: entry}}}}}}``); a model
    measured on some datasets only has none yet (its pages show its own weights, said to be unchosen)."""
    datasets = dev_results.get("datasets", {})
    by_model: dict[str, dict[str, Mapping[str, Entry]]] = {}
    for dataset, measured in datasets.items():
        for model, entry in measured.get("models", {}).items():
            by_model.setdefault(model, {})[dataset] = entry["explainers"]
    return {model: choose_default(by_dataset) for model, by_dataset in sorted(by_model.items())
            if len(by_dataset) == len(datasets)}
