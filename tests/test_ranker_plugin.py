"""A trainable ranker of another package, added as the docs say (docs/architecture.md, "How to
add a model"): a temporary package, installed as a real distribution (a ``.dist-info`` folder with
its ``entry_points.txt``) on the ``PYTHONPATH`` of the process that checks it and of its worker, registers its ranker
through the ``rerank_lab_rankers`` entry point. It then passes the registry-wide contract checks
(``tests/ranker_contract.py``): it trains as a job served by a worker process, its explanations and
edits are of the input that was scored, untrained it refuses to score, and its settings are counts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from qa_core.rankers import registry
from tests import ROOT

PLUGIN = "tiny_overlap"

# What a plugin author writes, following docs/architecture.md's checklist for a trainable model.
RANKER_SOURCE = '''
"""Word overlap with a penalty for answer words the question lacks, the penalty chosen on DEV."""

from dataclasses import dataclass

import numpy as np

from qa_core.evaluation import evaluate, qrels_from_questions, run_from_scores
from qa_core.rankers.base import Capabilities, Explanation, Ranker, RankerConfig, as_candidates, candidate_at, config_dict
from qa_core.training.events import TrainingEvent
from qa_core.types import NotTrainedError


@dataclass(frozen=True)
class TinyOverlapConfig(RankerConfig):
    grid_points: int = 4  # a training setting: an integer >= 1 (the Train page's input)


class TinyOverlap(Ranker):
    name = "tiny_overlap"
    title = "Word overlap with a learned penalty (a plugin)"
    config_class = TinyOverlapConfig
    capabilities = Capabilities(trainable=True, training_settings=("grid_points",))

    def __init__(self, config=None):
        super().__init__(config)
        self.penalty = None

    def _weights(self, question, answer):
        if self.penalty is None:
            raise NotTrainedError("tiny_overlap is not trained: train it or load a checkpoint")
        asked = set(question.lower().split())
        return [1.0 if word in asked else -self.penalty for word in answer.lower().split()]

    def score_pools(self, pools):
        return [np.array([sum(self._weights(q, c.text)) for c in as_candidates(cs)], dtype=np.float64) for q, cs in pools]

    def explain(self, question, candidates, index):
        text = candidate_at(candidates, index).text
        weights = self._weights(question, text)
        return Explanation(sum(weights), question.lower().split(), text.lower().split(), weights, "overlap")

    def fit(self, train, dev, *, seed=1, analyzer=None, progress=True, callback=None):
        points = self.config.grid_points
        best = None
        for step in range(1, points + 1):
            self.penalty = (step - 1) / points
            scores = self.score_pools([(q.text, q.candidates) for q in dev])
            dev_map = evaluate(run_from_scores(dev, scores), qrels_from_questions(dev)).aggregate["map"]
            if callback is not None:
                callback(TrainingEvent(step, total=points, unit="grid point", dev_map=dev_map))
            if best is None or dev_map > best[0]:
                best = (dev_map, step, self.penalty)
        self.penalty = best[2]
        return {"epochs_run": points, "best_epoch": best[1]}

    def state(self):
        if self.penalty is None:
            raise NotTrainedError("tiny_overlap is not trained: nothing to save")
        return {"config": config_dict(self.config), "penalty": self.penalty}

    @classmethod
    def from_state(cls, state):
        ranker = cls(cls.configure(**state["config"]))
        ranker.penalty = float(state["penalty"])
        return ranker
'''


def install_plugin(folder: Path) -> Path:
    """The package and its distribution metadata, as ``pip install`` leaves them in site-packages."""
    site = folder / "site"
    (site / "tiny_ranker_plugin").mkdir(parents=True)
    (site / "tiny_ranker_plugin" / "__init__.py").write_text(RANKER_SOURCE)
    dist = site / "tiny_ranker_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-ranker-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[rerank_lab_rankers]\n{PLUGIN} = tiny_ranker_plugin:TinyOverlap\n")
    return site


# The checks run in a process started with the plugin installed, as a user's would be: the registry
# reads the entry points (through catalogue) once, when it is first imported.
CHECKS = f"""
import sys
from pathlib import Path

from qa_core.rankers import registry
from tests.ranker_contract import (check_explanations_of_scored_input, check_trained_as_job,
                                   check_untrained_and_settings, train_as_jobs)

assert {PLUGIN!r} in registry.trainable(), registry.trainable()
check_untrained_and_settings({PLUGIN!r})
url = train_as_jobs(Path(sys.argv[1]), [{PLUGIN!r}])
check_trained_as_job(url, {PLUGIN!r})
check_explanations_of_scored_input(url, {PLUGIN!r})
print("contract kept")
"""


def test_a_plugin_ranker_passes_the_contract_checks(tmp_path: Path) -> None:
    site = install_plugin(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
           "RERANK_LAB_DATA": str(tmp_path / "data"), "RERANK_LAB_DB": f"sqlite:///{tmp_path / 'store.sqlite'}"}
    checked = subprocess.run([sys.executable, "-c", CHECKS, str(tmp_path)], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert checked.stdout.strip().endswith("contract kept")
    assert PLUGIN not in registry.available()  # this process never installed it: no other test sees it
