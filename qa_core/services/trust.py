"""How far to trust a model's heatmap, said where the heatmap is shown: the faithfulness measured by
``benchmarks/faithfulness.py`` (ERASER-style deletions on WikiQA and TrecQA TEST, against random
words; ``qa_core.faithfulness``), read from its result file."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from qa_core import config
from qa_core.explain.explainers import MODEL
from qa_core.services.explaining import DEV_RESULTS

RESULTS = config.PROJECT_ROOT / "benchmarks" / "results" / "faithfulness.json"
SHOWN_FRACTION = 0.2
NAMES = {"wikiqa": "WikiQA", "trecqa": "TrecQA"}


@cache
def _measured(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def measured_line(
    model: str, dataset: str, trained: bool, explainer: str | None = None, path: Path = RESULTS,
    dev_path: Path = DEV_RESULTS,
) -> str | None:
    """One sentence on the measured faithfulness of ``model``'s heatmaps by ``explainer`` (default:
    whichever TEST measured, the model's default), naming where it was measured: on ``dataset``
    when it is a benchmark dataset, else on WikiQA (then TrecQA), said to be another dataset; on
    TEST where the explainer is the default TEST measured, else on the DEV sample every explainer
    was measured on. ``trained``: the model has versions, so the measured one (trained by the
    benchmark) is never the version on screen, and the line says so. A measured model's explainer
    that was not measured is said to be unmeasured; ``None`` for a model never measured."""
    tested = _measured(path).get("datasets", {})
    developed = _measured(dev_path).get("datasets", {})
    for name in (dataset, "wikiqa", "trecqa"):
        entry = tested.get(name, {}).get("models", {}).get(model)
        split = "TEST"
        if entry is not None and explainer not in (None, entry.get("explainer", MODEL)):
            entry = developed.get(name, {}).get("models", {}).get(model, {}).get("explainers", {}).get(explainer)
            split = "DEV"
        summary = None if entry is None else next((s for s in entry["summaries"] if s["fraction"] == SHOWN_FRACTION), None)
        if summary is None or not summary["score_range"]:
            continue
        return _line(model, dataset, name, split, trained, entry, summary)
    if explainer is not None and any(model in d.get("models", {}) for d in tested.values()):
        return (f"The explainer {explainer.replace('_', ' ')} was not measured for {model} "
                "(benchmarks/faithfulness.py measures every explainer of a model on DEV): how far its heatmaps beat "
                "random words is not known. This candidate's own test is below.")
    return None


def _line(model: str, dataset: str, name: str, split: str, trained: bool, entry: dict[str, Any],
          summary: dict[str, Any]) -> str:
    share = 100 / summary["score_range"]
    p = summary["comprehensiveness_p"]
    verdict = "beat" if entry["beats_random"] else "do not beat"
    sample = " sample" if split == "DEV" else ""
    where = f"{NAMES.get(name, name)} {split}{sample} ({summary['pairs']:,} pairs)"
    if trained:
        whose = (f"the {model} that benchmarks/faithfulness.py trained on {NAMES.get(name, name)}, not the version "
                 "on screen")
    else:
        whose = model if name == dataset else f"{model} fitted on {NAMES.get(name, name)}"
    prefix = "" if name == dataset else f"Not measured on {dataset}. "
    explained = entry.get("explainer", MODEL).replace("_", " ")
    return (
        f"{prefix}Measured on {where} for {whose}, explainer {explained}: deleting the top "
        f"{SHOWN_FRACTION:.0%} of words by its weights lowers its score by "
        f"{summary['comprehensiveness'] * share:.0f}% of its score range, {SHOWN_FRACTION:.0%} random words "
        f"by {summary['random_comprehensiveness'] * share:.0f}% ({_p(p)}); its heatmaps {verdict} random "
        f"words at p < 0.01 (comprehensiveness and sufficiency at every k measured). This candidate's own "
        f"test is below."
    )


def _p(p: float | None) -> str:
    if p is None:
        return "no test"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"
