"""External systems (issue 36): SM-CNN served by the example scoring service against SM-CNN in process.

On WikiQA TEST: the largest difference between the service's scores and the in-process scores of the
same checkpoint (the contract: <= 1e-6), the per-question overhead of going through HTTP (service
time minus in-process time, p50 and p95, uncached), and a whole-split Compare of SM-CNN, a stored
run (SM-CNN's own TEST run kept as a system) and the service, the first time and warm (the
service's scores cached; SM-CNN and the run scored again).

SM-CNN is trained here for ``EPOCHS`` epochs (seed 1): the benchmark measures the path, not the
model's quality, and any checkpoint of the model serves. The service runs as its own process
(``python -m examples.scoring_service --model <checkpoint>``) on this machine's loopback.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import torch
from common import ROOT, machine, measure_or_render

from qa_core import config
from qa_core.data.importers import load_wikiqa
from qa_core.rankers import registry
from qa_core.rankers.external import RunRanker, ServiceRanker
from qa_core.rankers.service_client import ServiceClient
from qa_core.services import compare
from qa_core.services.experiments import score_questions

sys.path.insert(0, str(ROOT))
from tests.scoring_services import serving  # noqa: E402  (the tests' way of starting a service process)

EPOCHS = 1
THREADS = 1  # torch threads in both processes, so that the two sides score alike
SEED = 1


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def measure() -> dict[str, Any]:
    torch.set_num_threads(THREADS)
    wikiqa = load_wikiqa(config.shared_data_dir() / "wikiqa")
    test = [q for q in wikiqa.split("test") if q.candidates]
    local = registry.create("smcnn", max_epochs=EPOCHS)
    local.fit(wikiqa.split("train"), wikiqa.split("dev"), seed=SEED, progress=False)
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = registry.save(local, Path(folder) / "smcnn.pt")
        local = registry.load(checkpoint)  # exactly what the service loads
        store = f"sqlite:///{Path(folder) / 'store.sqlite'}"
        # Every TEST text parsed once first (the parse cache both processes read), so neither side's
        # timing holds a spaCy parse the other's does not.
        run = score_questions(local, test)
        threads = {"OMP_NUM_THREADS": str(THREADS), "MKL_NUM_THREADS": str(THREADS)}
        with serving(["examples.scoring_service", "--model", str(checkpoint), "--db", store], env=threads) as url:
            service = ServiceRanker("system:smcnn-service", ServiceClient(url, cache_id=str(uuid.uuid4())))
            service.score("warm up", ["the connection opens once, as a page keeps it"])
            largest, local_ms, service_ms = 0.0, [], []
            for question in test:
                start = time.perf_counter()
                mine = local.score(question.text, question.candidates)
                middle = time.perf_counter()
                theirs = service.score(question.text, question.candidates)
                end = time.perf_counter()
                largest = max(largest, float(abs(mine - theirs).max()))
                local_ms.append((middle - start) * 1000)
                service_ms.append((end - middle) * 1000)
            overhead = [s - m for s, m in zip(service_ms, local_ms, strict=True)]
            fresh = ServiceRanker("system:smcnn-service", ServiceClient(url, cache_id=str(uuid.uuid4())))
            rankers = {"smcnn": local, "system:smcnn-run": RunRanker("system:smcnn-run", "wikiqa", run,
                                                                      {q.qid: q.text for q in test}),
                       "system:smcnn-service": fresh}
            timings = []
            for _ in range(2):
                start = time.perf_counter()
                compare.compare_split(rankers, test)
                timings.append(time.perf_counter() - start)
    return {
        "machine": machine(), "epochs": EPOCHS, "questions": len(test),
        "pairs": sum(len(q.candidates) for q in test), "largest_difference": largest,
        "local_ms": {"p50": statistics.median(local_ms), "p95": _percentile(local_ms, 95)},
        "service_ms": {"p50": statistics.median(service_ms), "p95": _percentile(service_ms, 95)},
        "overhead_ms": {"p50": statistics.median(overhead), "p95": _percentile(overhead, 95)},
        "compare_s": {"first": timings[0], "warm": timings[1]},
    }


def render(result: dict[str, Any]) -> list[str]:
    o, s, m = result["overhead_ms"], result["service_ms"], result["local_ms"]
    return [
        "## External systems: SM-CNN behind the example scoring service",
        "",
        "Script: `benchmarks/systems.py`. SM-CNN (trained here for "
        f"{result['epochs']} epoch{'s' if result['epochs'] != 1 else ''}, seed 1: the path is measured, not the "
        "model) scored on WikiQA TEST "
        f"({result['questions']} questions, {result['pairs']:,} pairs) in process and through "
        "`examples/scoring_service.py` (Starlette under uvicorn, its own process, loopback HTTP, one request per "
        "question, the cache off; one torch thread on each side; every TEST text parsed once before the timing, so "
        "both sides read spaCy's parses from the same cache).",
        "",
        f"- Largest difference between the service's scores and the in-process scores: "
        f"{result['largest_difference']:.2e} (the contract: at most 1e-6).",
        f"- Per question: in process p50 {m['p50']:.1f} ms, p95 {m['p95']:.1f} ms; through the service p50 "
        f"{s['p50']:.1f} ms, p95 {s['p95']:.1f} ms; overhead (service minus in process) p50 {o['p50']:.1f} ms, "
        f"p95 {o['p95']:.1f} ms.",
        f"- A whole-split Compare of SM-CNN, its TEST run kept as a system and the service: "
        f"{result['compare_s']['first']:.1f} s the first time, {result['compare_s']['warm']:.1f} s warm (the "
        "service's scores from the cache; SM-CNN scores again).",
        "",
        "The 2-core machine was shared with other jobs while this ran, so the milliseconds are noisy; the score "
        "equality is not.",
    ]


if __name__ == "__main__":
    measure_or_render("systems", __doc__, measure, render)
