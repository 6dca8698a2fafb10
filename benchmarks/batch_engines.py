"""The ``batch`` part of ``benchmarks/speed.py``: ``batch-score``'s local and Ray engines on this machine.

Every WikiQA pair (all splits, in file order, first-stage rank = position) as JSONL, scored by
SM-CNN (one epoch on WikiQA TRAIN) with 1 and 2 parsing workers: the local engine (DataLoader
parsing processes, scoring in the main process) and the Ray engine (a local Ray cluster started and
stopped for each run, as ``batch-score --engine ray`` without ``--address`` does: parsing actors
and one scoring actor). Each run starts with an empty parse cache (a data folder of its own),
since parsing is most of the work and a warm cache would time the cache. The two engines' runs are
compared line by line (same order, scores within 1e-6).

Pairs/s are over the whole command (for Ray: cluster start, actor start, work and shutdown) and
over the scoring stream alone (from the first block requested to the last written). The Ray runs
also give each stage's per-actor rate (pairs per second of an actor's busy time), from which the
section computes, on paper, what a second machine like this one would add.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WORKERS = (1, 2)
TOLERANCE = 1e-6
CORES_PER_MACHINE = 2  # the machine the on-paper estimate adds is taken to be like this one


def wikiqa_pairs(path: Path, dataset: Any) -> int:
    """Every pair of ``dataset`` as batch-score JSONL; returns the pairs written."""
    with path.open("w") as handle:
        pairs = 0
        for question in dataset.questions:
            for rank, candidate in enumerate(question.candidates, start=1):
                handle.write(json.dumps({"qid": question.qid, "question": question.text, "docid": candidate.doc_id,
                                         "text": candidate.text, "rank": rank}) + "\n")
                pairs += 1
    return pairs


def driver_rate(source: Path) -> float:
    """Pairs/s of the driver's own pass over the input (reading and checking, no parsing): with Ray
    the driver reads the input once to find its chunks, so no cluster scores faster than this."""
    from qa_core.services.batch_chunks import CHUNK_PAIRS, chunks, read_rows

    started = time.perf_counter()
    pairs = sum(len(chunk) for chunk in chunks(read_rows(source, None), source, CHUNK_PAIRS))
    return pairs / (time.perf_counter() - started)


def compare_runs(a: Path, b: Path) -> dict[str, Any]:
    left, right = a.read_text().split("\n"), b.read_text().split("\n")
    same_order = [line.split()[:3] for line in left] == [line.split()[:3] for line in right]
    diff = max((abs(float(x.split()[4]) - float(y.split()[4])) for x, y in zip(left, right) if x), default=0.0)
    return {"same_order": same_order, "max_abs_difference": diff, "identical": same_order and diff <= TOLERANCE}


def run_batch(folder: Path, wikiqa: Any, trained_smcnn: Callable[[Any, Path], Any]) -> dict[str, Any]:
    """Every engine x workers run (see the module docstring) on the ``wikiqa`` dataset; ``folder``
    holds the input, the model (``trained_smcnn`` writes ``smcnn.pt``), the runs and the per-run
    data folders."""
    from qa_core.rankers import registry
    from qa_core.services.batch import batch_score
    from qa_core.services.batch_chunks import BatchRequest

    source = folder / "wikiqa_pairs.jsonl"
    pairs = wikiqa_pairs(source, wikiqa)
    checkpoint = folder / "smcnn.pt"
    if not checkpoint.is_file():
        trained_smcnn(wikiqa, folder)
    runs: list[dict[str, Any]] = []
    for workers in WORKERS:
        outputs = {}
        for engine in ("local", "ray"):
            data = folder / f"data_{engine}_{workers}"
            data.mkdir()
            os.environ["RERANK_LAB_DATA"] = str(data)  # an empty parse cache (Ray's actors get this folder too)
            outputs[engine] = folder / f"{engine}_{workers}.run"
            request = BatchRequest(source, outputs[engine], engine=engine, workers=workers, quiet=True)
            load_average = os.getloadavg()[0]
            started = time.perf_counter()
            result = batch_score(request, registry.load(checkpoint))
            command_s = time.perf_counter() - started
            runs.append({"engine": engine, "workers": workers, "pairs": result.pairs, "command_s": command_s,
                         "stream_s": result.seconds, "command_pairs_per_second": result.pairs / command_s,
                         "stream_pairs_per_second": result.pairs_per_second, "scorers": result.scorers or 1,
                         "stages": result.stages, "load_average": load_average})
        runs[-1]["same_as_local"] = compare_runs(outputs["ray"], outputs["local"])
    return {"pairs": pairs, "questions": len(wikiqa.questions), "driver_pairs_per_second": driver_rate(source),
            "runs": runs}


def on_paper(part: dict[str, Any], machines: int) -> dict[str, Any]:
    """The best split of ``machines`` x ``CORES_PER_MACHINE`` CPUs between parsing and scoring
    actors, each at the per-actor rates of the 1-worker Ray run, capped by the driver's rate."""
    stages = next(r["stages"] for r in part["runs"] if r["engine"] == "ray" and r["workers"] == 1)
    parse, score = stages["parse"]["pairs_per_actor_second"], stages["score"]["pairs_per_actor_second"]
    cpus = machines * CORES_PER_MACHINE
    best = max(((p, cpus - p) for p in range(1, cpus)), key=lambda split: min(split[0] * parse, split[1] * score))
    rate = min(best[0] * parse, best[1] * score)
    return {"cpus": cpus, "parsers": best[0], "scorers": best[1], "pairs_per_second": min(rate, part["driver_pairs_per_second"]),
            "driver_bound": rate > part["driver_pairs_per_second"], "parse_rate": parse, "score_rate": score}


def render_batch(part: dict[str, Any]) -> list[str]:
    runs = {(r["engine"], r["workers"]): r for r in part["runs"]}
    lines = [
        "### Batch scoring: local and Ray engines", "",
        f"`python -m qa_core batch-score` on every WikiQA pair ({part['pairs']:,} pairs, {part['questions']:,} "
        "questions, JSONL), SM-CNN trained one epoch on WikiQA TRAIN, CPU, each run with an empty parse cache. "
        "*Command*: the whole call (for Ray: starting a local cluster, its actors, the work, stopping it); "
        "*stream*: from the first block asked for to the last line written (for Ray the actors start inside it). Ray: `--workers` parsing actors "
        "and one scoring actor; local: `--workers` DataLoader parsing processes and scoring in the main "
        "process. With 2 workers both engines run 3 busy processes on the 2 cores. *Load*: the 1-minute load "
        "average when the run started; above 2, other work (other engineers' tests) shared the 2 cores, so the "
        "rates are a share of this machine and only runs at similar load compare.", "",
        "| engine | workers | command s | pairs/s (command) | pairs/s (stream) | same run as local | load |",
        "|---|---|---|---|---|---|---|",
    ]
    for (engine, workers), run in sorted(runs.items(), key=lambda item: (item[0][1], item[0][0])):
        same = run.get("same_as_local")
        same_cell = "" if same is None else (f"yes (max diff {same['max_abs_difference']:.0e})" if same["identical"]
                                             else f"NO (order {same['same_order']}, max diff {same['max_abs_difference']:.1e})")
        lines.append(f"| {engine} | {workers} | {run['command_s']:.1f} | {run['command_pairs_per_second']:,.0f} | "
                     f"{run['stream_pairs_per_second']:,.0f} | {same_cell} | {run['load_average']:.1f} |")
    lines += ["", "Ratios (Ray / local, pairs/s over the whole command; over the stream in parentheses): " + "; ".join(
        f"{w} worker{'s' if w > 1 else ''}: {runs[('ray', w)]['command_pairs_per_second'] / runs[('local', w)]['command_pairs_per_second']:.2f} "
        f"({runs[('ray', w)]['stream_pairs_per_second'] / runs[('local', w)]['stream_pairs_per_second']:.2f})" for w in WORKERS)
        + ". Going from 1 to 2 workers: local "
        f"{runs[('local', 2)]['command_pairs_per_second'] / runs[('local', 1)]['command_pairs_per_second']:.2f}x, Ray "
        f"{runs[('ray', 2)]['command_pairs_per_second'] / runs[('ray', 1)]['command_pairs_per_second']:.2f}x.", ""]
    one, two = on_paper(part, 1), on_paper(part, 2)
    measured = runs[("ray", 1)]["stream_pairs_per_second"]
    lines += [
        "**One more machine, on paper (not measured: there is one machine here).** Per-actor rates of the "
        f"1-worker Ray run (pairs per second of an actor's busy time): parsing {one['parse_rate']:,.0f}, scoring "
        f"{one['score_rate']:,.0f}; the driver reads and checks the input at {part['driver_pairs_per_second']:,.0f} "
        f"pairs/s. Splitting a machine's {one['cpus']} CPUs as well as possible ({one['parsers']} parsing, "
        f"{one['scorers']} scoring: the scorer busy {one['pairs_per_second'] / (one['scorers'] * one['score_rate']):.0%} of the time) gives "
        f"{one['pairs_per_second']:,.0f} pairs/s from these rates, where the run "
        f"measured {measured:,.0f} over its stream (the rest is Ray's own cost: moving blocks, actor start, and "
        f"the other processes on these cores). Two such machines ({two['cpus']} CPUs: {two['parsers']} parsing, "
        f"{two['scorers']} scoring) would give {two['pairs_per_second']:,.0f} pairs/s"
        f"{' (the driver is the limit)' if two['driver_bound'] else ''}, {two['pairs_per_second'] / one['pairs_per_second']:.2f}x "
        "one machine by the same rates; with the same share of overhead as measured here, about "
        f"{measured * two['pairs_per_second'] / one['pairs_per_second']:,.0f} pairs/s. It assumes the second "
        "machine's cores as fast as these, the input file at the same path there, and no cost for sending "
        "blocks between machines; actor start-up (seconds) is paid once per run, so it matters less the "
        "bigger the input. The CUDA path (`num_gpus` scoring actors) is not measured: there is no GPU here.", ""]
    return lines
