"""The shared training loop, and SM-CNN trained for real on the bundled demo corpus."""

from __future__ import annotations

import itertools

import numpy as np
import torch
from torch import nn

from qa_core.rankers import registry
from qa_core.rankers.smcnn import SMCNNRanker
from qa_core.services.experiments import evaluate_ranker
from qa_core.training.batching import TensorBatches, pad_ids, trim_padding
from qa_core.training.events import TrainingEvent
from qa_core.training.loop import train
from qa_core.types import Question


def _toy_problem(rows: int = 40) -> tuple[nn.Module, TensorBatches]:
    torch.manual_seed(0)
    inputs = {"x": torch.randn(rows, 3)}
    targets = (inputs["x"].sum(dim=1) > 0).long()
    return nn.Sequential(nn.Linear(3, 2)), TensorBatches(inputs, targets, batch_size=4)


class _Wrapped(nn.Module):
    """Keyword inputs, as TensorBatches yields them."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def test_loop_restores_the_best_dev_state_and_stops_on_patience():
    inner, batches = _toy_problem()  # 10 batches per epoch
    model = _Wrapped(inner)
    # Dev MAP rises until the 4th check (epoch 2), then only falls: patience 3 stops after epoch 5.
    scripted = itertools.chain([0.2, 0.3, 0.4, 0.9], itertools.repeat(0.1))
    snapshots: list[dict[str, torch.Tensor]] = []

    def record(event: TrainingEvent) -> None:
        assert event.unit == "epoch" and event.total == 25 and event.dev_map is not None
        snapshots.append({k: v.clone() for k, v in model.state_dict().items()})

    report = train(
        model,
        torch.optim.SGD(model.parameters(), lr=0.5),
        nn.CrossEntropyLoss(),
        batches,
        lambda: next(scripted),
        eval_every=5,
        max_epochs=25,
        patience=3,
        seed=3,
        progress=False,
        callback=record,
    )
    assert report["best_dev_map"] == 0.9 and report["best_epoch"] == 2
    assert report["epochs_run"] == 5 and report["stopped_early"]
    assert [p["batch"] for p in report["history"]][:4] == [5, 10, 15, 20]
    assert len(report["history"]) == 10  # two checks per epoch
    best = snapshots[3]
    assert all(torch.equal(best[k], v) for k, v in model.state_dict().items())
    assert not torch.equal(snapshots[-1]["inner.0.weight"], best["inner.0.weight"])


def test_loop_checks_dev_at_the_end_of_a_short_epoch():
    inner, batches = _toy_problem(rows=12)  # 3 batches per epoch, eval_every 10
    report = train(_Wrapped(inner), torch.optim.SGD(inner.parameters(), lr=0.1), nn.CrossEntropyLoss(),
                   batches, lambda: 0.5, eval_every=10, max_epochs=2, patience=5, progress=False)
    assert [(p["epoch"], p["batch"]) for p in report["history"]] == [(1, 3), (2, 6)]


def test_batches_cover_every_row_once_in_a_seeded_order():
    _, batches = _toy_problem(rows=10)
    assert len(batches) == 3

    def epoch(seed: int) -> list[torch.Tensor]:
        return [inputs["x"] for inputs, _ in batches(torch.Generator().manual_seed(seed))]

    first = torch.cat(epoch(1))
    assert torch.equal(first, torch.cat(epoch(1)))
    assert not torch.equal(first, torch.cat(epoch(2)))
    assert sorted(map(tuple, first.tolist())) == sorted(map(tuple, batches.inputs["x"].tolist()))


def test_padding_helpers():
    padded = pad_ids([[5, 6, 7], [8], []], max_len=2)
    assert padded.tolist() == [[5, 6], [8, 0], [0, 0]]
    assert trim_padding(torch.tensor([[5, 0, 0], [6, 7, 0]])).tolist() == [[5, 0], [6, 7]]
    assert trim_padding(torch.tensor([[0, 0]])).tolist() == [[0]]


# ---------------------------------------------------------------------------------- SM-CNN on the demo corpus


def _test_scores(ranker: SMCNNRanker, questions: list[Question]) -> np.ndarray:
    return np.concatenate(ranker.score_pools([(q.text, [c.text for c in q.candidates]) for q in questions]))


def test_smcnn_beats_bm25_on_the_demo_test_split(demo, single_thread):
    ranker = SMCNNRanker()  # the paper's settings: 25 epochs at most, patience 5
    report = ranker.fit(demo.split("train"), demo.split("dev"), seed=1, progress=False)
    test = demo.split("test")
    smcnn_map = evaluate_ranker(ranker, test).aggregate["map"]
    bm25_map = evaluate_ranker(registry.create("bm25"), test).aggregate["map"]
    print(f"demo test MAP: SM-CNN {smcnn_map:.4f}, BM25 {bm25_map:.4f}; "
          f"{report['epochs_run']} epochs in {report['seconds']} s, best dev MAP {report['best_dev_map']:.4f}")
    assert smcnn_map > bm25_map
    assert report["best_dev_map"] == max(point["dev_map"] for point in report["history"])


def test_smcnn_training_is_deterministic_under_a_seed(demo, single_thread):
    def run(seed: int) -> np.ndarray:
        ranker = SMCNNRanker()
        ranker.fit(demo.split("train"), demo.split("dev"), seed=seed, progress=False)
        return _test_scores(ranker, demo.split("test"))

    first = run(seed=7)
    assert np.array_equal(first, run(seed=7))
    assert not np.array_equal(first, run(seed=8))
