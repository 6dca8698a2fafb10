"""``batch-score --engine ray`` on real Ray clusters: the session's cluster of 2 CPUs
(tests/conftest.py's ``ray_cluster``) joined by address, and a local cluster the CLI starts and
stops itself. The Ray and local engines write the same run (same lines in the same order, scores
within 1e-6) on a WikiQA-sized input written here from the demo corpus, with a model that reads
the first-stage rank (so the rank demonstrably reaches Ray's scorers); and on a TREC run whose
texts come from the store, scored with the version promoted for that dataset."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from db.base import NewVersion
from db.store import Store
from qa_core.cli import main
from qa_core.data.demo import load_demo
from qa_core.rankers import registry
from qa_core.services import batch
from qa_core.services.batch_chunks import BatchRequest
from qa_core.services.experiments import train_ranker
from qa_core.types import Dataset
from tests import ROOT
from tests.conftest import RayCluster, copy_to_models, ray_processes

QUERIES = 240  # WikiQA's TEST split has 237 questions and 2,341 pairs
POOL = (8, 16)


def wikiqa_sized_pairs(path: Path, seed: int = 7) -> int:
    """~2,900 pairs: each demo question asked in up to six ways, each time with a random pool of
    the demo's sentences (its own among them), ranked and given a URL; returns the pairs written."""
    demo = load_demo()
    sentences = [(c.doc_id, c.text) for q in demo.questions for c in q.candidates]
    rng = random.Random(seed)
    prefixes = ["", "Tell me: ", "Quick question - ", "I wonder, ", "Do you know ", "Please answer: "]
    pairs = 0
    with path.open("w") as handle:
        for n in range(QUERIES):
            question = demo.questions[n % len(demo.questions)]
            own = [(c.doc_id, c.text) for c in question.candidates]
            others = [s for s in sentences if s not in own]
            pool = own + rng.sample(others, max(rng.randint(*POOL) - len(own), 2))
            rng.shuffle(pool)
            text = prefixes[n // len(demo.questions) % len(prefixes)] + question.text
            for rank, (doc_id, sentence) in enumerate(pool, start=1):
                record = {"qid": f"q{n:03d}", "question": text, "docid": doc_id, "text": sentence, "rank": rank,
                          "url": f"https://en.wikipedia.org/wiki/{doc_id}"}
                handle.write(json.dumps(record) + "\n")
                pairs += 1
    return pairs


def ranked_demo(questions: int = 60) -> Dataset:
    """Some demo questions with first-stage ranks (pool positions), so the attention LSTM learns
    them (its quality does not matter here, only that the rank reaches it)."""
    demo = load_demo()
    ranked = [dataclasses.replace(q, candidates=[dataclasses.replace(c, first_stage_rank=i)
                                                 for i, c in enumerate(q.candidates, start=1)])
              for q in demo.split("train")[:questions] + demo.split("dev")]
    return dataclasses.replace(demo, questions=ranked)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The attention LSTM (reads the first-stage rank), one epoch on the ranked demo corpus."""
    path = tmp_path_factory.mktemp("ray_models") / "attention_lstm.pt"
    train_ranker("attention_lstm", ranked_demo(), progress=False, checkpoint=path, model_config={"max_epochs": 1})
    return path


def run_lines(path: Path) -> list[tuple[str, str, int, float, str]]:
    lines = []
    for line in path.read_text().splitlines():
        qid, _, docid, rank, score, tag = line.split()
        lines.append((qid, docid, int(rank), float(score), tag))
    return lines


def assert_identical(ray_run: Path, local_run: Path) -> None:
    """Same lines in the same order (query, document, rank, tag), scores within 1e-6."""
    ray_lines, local_lines = run_lines(ray_run), run_lines(local_run)
    assert len(ray_lines) == len(local_lines) > 0
    assert [(q, d, r, t) for q, d, r, _, t in ray_lines] == [(q, d, r, t) for q, d, r, _, t in local_lines]
    assert max(abs(a[3] - b[3]) for a, b in zip(ray_lines, local_lines)) <= 1e-6


def test_ray_and_local_engines_write_the_same_run(ray_cluster: RayCluster, checkpoint: Path, tmp_path: Path) -> None:
    source = tmp_path / "pairs.jsonl"
    pairs = wikiqa_sized_pairs(source)
    assert pairs > 2000
    results = {}
    for engine in ("local", "ray"):
        request = BatchRequest(source, tmp_path / f"{engine}.run", engine=engine, workers=1, chunk_pairs=256,
                                     address=ray_cluster.address if engine == "ray" else None, quiet=True)
        results[engine] = batch.batch_score(request, registry.load(checkpoint))
        assert results[engine].lines == results[engine].pairs == pairs
    assert_identical(tmp_path / "ray.run", tmp_path / "local.run")
    ray = results["ray"]
    assert (ray.engine, ray.scorers, ray.gpus) == ("ray", 1, 0)
    for stage in ("parse", "score"):  # one actor each saw every pair, and says how long it worked
        assert ray.stages[stage]["actors"] == 1 and ray.stages[stage]["pairs"] == pairs
        assert ray.stages[stage]["busy_s"] > 0

    # The model reads the rank: with the ranks reversed the scores change, so equal runs mean
    # Ray's scorers got the ranks (shown on the first 500 pairs).
    records = [json.loads(line) for line in source.read_text().splitlines()[:500]]
    for name, rank in (("ranked", lambda r: r["rank"]), ("reversed", lambda r: 20 - r["rank"])):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({**r, "rank": rank(r)}) + "\n" for r in records))
        batch.batch_score(BatchRequest(tmp_path / f"{name}.jsonl", tmp_path / f"{name}.run", workers=0, chunk_pairs=256,
                                       quiet=True), registry.load(checkpoint))
    ranked, reversed_ = (sorted((q, d, s) for q, d, _, s, _ in run_lines(tmp_path / f"{name}.run"))
                         for name in ("ranked", "reversed"))
    assert sum(a != b for a, b in zip(ranked, reversed_)) > len(records) / 2


def test_cli_scores_a_trec_run_from_the_store_on_a_cluster_it_starts_and_stops(checkpoint: Path, tmp_path: Path) -> None:
    """``python -m qa_core batch-score RUN --data demo --model attention_lstm --engine ray`` as a user
    runs it: the texts and the version promoted for demo come from the store, Ray on its own
    local cluster, gone afterwards."""
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store = Store(url)
    store.datasets.import_dataset(load_demo())
    store.models.register_model("attention_lstm", NewVersion("attention_lstm", copy_to_models(checkpoint), {"dataset": "demo"}, {}, promote=True))
    store.close()
    first_stage = tmp_path / "bm25.run"
    first_stage.write_text("".join(f"{q.qid} Q0 {c.doc_id} {i} {20 - i} bm25\n"
                                   for q in load_demo().split("test") for i, c in enumerate(q.candidates, start=1)))
    pairs = len(first_stage.read_text().splitlines())
    ray_tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"rl_cli_{os.getpid()}"
    env = {**os.environ, "RAY_TMPDIR": str(ray_tmp), "PYTHONPATH": str(ROOT), "RERANK_LAB_DB": url}
    command = ["batch-score", str(first_stage), "--data", "demo", "--model", "attention_lstm", "--workers", "1",
               "--chunk-pairs", "64", "--quiet"]
    try:
        result = subprocess.run([sys.executable, "-m", "qa_core", *command, "--out", str(tmp_path / "ray.run"),
                                 "--engine", "ray"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        assert (json.loads(result.stdout)["engine"], json.loads(result.stdout)["lines"]) == ("ray", pairs)
        assert " INFO " not in result.stderr and " WARNING " not in result.stderr  # --quiet: no Ray Data logs
        assert list(ray_tmp.glob("**/session_*"))  # the cluster ran there ...
        assert ray_processes(str(ray_tmp)) == []  # ... and is stopped
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert main(["--db", url, *command, "--out", str(tmp_path / "local.run")]) == 0
    assert_identical(tmp_path / "ray.run", tmp_path / "local.run")
    assert {tag for *_, tag in run_lines(tmp_path / "ray.run")} == {"attention_lstm"}
