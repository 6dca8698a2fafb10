"""The default explainer per model (qa_core.explain.defaults): the rule on hand-made DEV entries, and
the defaults stored by benchmarks/faithfulness.py reproduced from its stored DEV results."""

from __future__ import annotations

import json

from qa_core.explain.defaults import choose_default, defaults, dev_score
from tests import ROOT


def entry(margin: float, beats: bool) -> dict:
    """A DEV entry whose every k has ``margin`` (share of a score range of 2)."""
    summary = {"score_range": 2.0, "comprehensiveness": 0.3 + 2 * margin, "random_comprehensiveness": 0.3,
               "sufficiency": 0.1 - 2 * margin, "random_sufficiency": 0.1}
    return {"summaries": [summary] * 3, "beats_random": beats}


def test_the_rule_prefers_qualifying_explainers_then_the_higher_dev_score():
    assert abs(dev_score([entry(0.1, True), entry(0.3, True)]) - 0.2) < 1e-12
    # occlusion scores higher but does not beat random on TrecQA: IG, qualifying on both, wins.
    by_dataset = {
        "wikiqa": {"model": entry(0.05, True), "occlusion": entry(0.4, True), "integrated_gradients": entry(0.1, True)},
        "trecqa": {"model": entry(0.05, False), "occlusion": entry(0.4, False), "integrated_gradients": entry(0.1, True)},
    }
    assert choose_default(by_dataset) == "integrated_gradients"
    # none qualifies: the highest DEV score; a tie goes to the model's own weights.
    assert choose_default({"wikiqa": {"model": entry(0.1, False), "occlusion": entry(0.2, False)}}) == "occlusion"
    assert choose_default({"wikiqa": {"occlusion": entry(0.1, True), "model": entry(0.1, True)}}) == "model"
    # a model measured on one DEV dataset of two has no default yet
    stored = {"datasets": {"wikiqa": {"models": {"a": {"explainers": by_dataset["wikiqa"]},
                                                 "b": {"explainers": by_dataset["wikiqa"]}}},
                           "trecqa": {"models": {"a": {"explainers": by_dataset["trecqa"]}}}}}
    assert defaults(stored) == {"a": "integrated_gradients"}


def test_stored_defaults_follow_from_the_stored_dev_results():
    results = ROOT / "benchmarks" / "results"
    dev = json.loads((results / "faithfulness_dev.json").read_text())
    assert dev["defaults"] and defaults(dev) == dev["defaults"]
    test = json.loads((results / "faithfulness.json").read_text())
    for measured in test["datasets"].values():
        for model, chosen in dev["defaults"].items():
            if model in measured["models"]:
                assert measured["models"][model].get("explainer", "model") == chosen  # TEST measured the default


def test_trust_line_names_the_shown_explainer_and_where_it_was_measured(tmp_path):
    from qa_core.services import trust

    summary = {"fraction": 0.2, "score_range": 1.0, "pairs": 50, "comprehensiveness": 0.3,
               "random_comprehensiveness": 0.1, "comprehensiveness_p": 0.0001}
    tested = {"datasets": {"wikiqa": {"models": {"m": {"explainer": "occlusion", "summaries": [summary],
                                                       "beats_random": True}}}}}
    dev_entry = {"explainer": "integrated_gradients", "summaries": [{**summary, "pairs": 20}], "beats_random": False}
    developed = {"datasets": {"wikiqa": {"models": {"m": {"explainers": {"integrated_gradients": dev_entry}}}}}}
    (tmp_path / "test.json").write_text(json.dumps(tested))
    (tmp_path / "dev.json").write_text(json.dumps(developed))

    def line(explainer):
        return trust.measured_line("m", "wikiqa", False, explainer, tmp_path / "test.json", tmp_path / "dev.json")

    assert "WikiQA TEST (50 pairs) for m, explainer occlusion" in line("occlusion") and "heatmaps beat" in line(None)
    shown = line("integrated_gradients")
    assert "WikiQA DEV sample (20 pairs) for m, explainer integrated gradients" in shown
    assert "by 30% of its score range, 20% random words by 10%" in shown and "do not beat random" in shown
    assert "gradient x input was not measured" in line("gradient_x_input").replace("×", "x")
