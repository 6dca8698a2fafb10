"""The GPU check: every neural ranker on a CUDA device against the CPU, on a machine that has only
Python, torch, numpy, pandas, scipy and scikit-learn (an offline cluster node).

    python benchmarks/gpu_check.py make --bundle DIR [--data demo|wikiqa]     # on a CPU machine
    python benchmarks/gpu_check.py run --bundle DIR --device cuda --out DIR    # on the GPU node

``make`` (the whole project installed) trains one checkpoint per neural ranker (the registry's
rankers whose capabilities say ``neural``) and writes the bundle: per ranker the checkpoint as it
scored TEST, the encoded TEST, DEV and TRAIN inputs and the CPU's TEST scores; the TEST and DEV
pools' labels; and for one TEST question the parses, spaCy token vectors and GloVe rows its
request path reads. It measures the bundle and refuses one over ``MAX_BUNDLE_BYTES``.

``run`` needs this file, ``qa_core`` and the bundle. It writes one JSON (``gpu_check.json`` in
``--out``): per ranker, the device's fp32 scores against the bundle's CPU scores, the same under
autocast (bfloat16 and float16: difference and MAP change, reported), pairs/s on the device and on
the node's CPU, one training epoch from the encoded TRAIN batches on the device and on the CPU
(loss finite, DEV MAP within ``EPOCH_MAP_POINTS``), and the request path (``score_pools``, then
``explain`` of the best candidate, whose score must equal the ranked score). Nothing of spaCy, the
GloVe package, SQLAlchemy, Streamlit, ir-measures, tqdm or catalogue may be imported on the way
(tests/test_gpu_check.py runs it with everything outside the node's packages refused).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib
import io
import json
import lzma
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from qa_core import ordering  # noqa: E402
from qa_core.device import describe, use_fp32_precision  # noqa: E402
from qa_core.text import contextual, nlp, vectors  # noqa: E402
from qa_core.training import loop  # noqa: E402
from qa_core.types import Candidate, InputError  # noqa: E402

BUNDLE_FORMAT = 1
MAX_BUNDLE_BYTES = 50 * 2**20  # what a node takes along besides the source tree (about 60 MiB in all)
MANIFEST = "manifest.json"
POOLS = "pools.pt.xz"
REQUEST = "request.pt.xz"
RESULT = "gpu_check.json"
FP32_TOLERANCE = 1e-4  # largest |device score - CPU score| in fp32
EXPLAIN_TOLERANCE = 1e-5  # |explanation score - ranked score|: a 1-row forward against a batched one
EPOCH_MAP_POINTS = 1.0  # DEV MAP points (x100) an epoch on the device may differ from the CPU's
AUTOCAST_DTYPES = (torch.bfloat16, torch.float16)
TIMED_PASSES = 3  # timed scoring passes per device, after one warm-up
CPU = torch.device("cpu")


# ---------------------------------------------------------------------------------------- bundle files


def save_part(payload: dict[str, Any], path: Path) -> int:
    """``torch.save`` through xz (padding compresses away; float16 token vectors lose 10% more than
    with gzip); returns the bytes written."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    path.write_bytes(lzma.compress(buffer.getvalue()))
    return path.stat().st_size


def load_part(path: Path) -> dict[str, Any]:
    """Inverse of ``save_part``: tensors and plain data only (``weights_only``), onto the CPU."""
    return torch.load(io.BytesIO(lzma.decompress(path.read_bytes())), map_location="cpu", weights_only=True)


def bundle_bytes(bundle: Path, limit: int = MAX_BUNDLE_BYTES) -> int:
    """What the node must take along: every file of the bundle; ``InputError`` over ``limit``."""
    total = sum(path.stat().st_size for path in bundle.iterdir() if path.is_file())
    if total > limit:
        raise InputError(f"the bundle {bundle} is {total / 2**20:.1f} MiB, over {limit / 2**20:.0f} MiB")
    return total


# ---------------------------------------------------------------------------------------- metrics


def mean_average_precision(scores: np.ndarray, pools: dict[str, Any]) -> float:
    """MAP over the pools with trec_eval's semantics, as ``qa_core.evaluation`` (raw mode): relevant is
    label > 0, ties by ``qa_core.ordering``'s rule (doc_id descending), a pool without a relevant candidate scores 0.

    A few lines of numpy rather than ``qa_core.evaluation``, since ir-measures is not on the GPU node;
    tests/test_gpu_check.py checks that the two agree."""
    labels, doc_ids = pools["labels"].numpy(), pools["doc_ids"]
    precisions, start = [], 0
    for size in pools["sizes"].tolist():
        rows = range(start, start + size)
        order = [rows[i] for i in ordering.order([doc_ids[row] for row in rows], scores[start:start + size])]
        relevant = labels[order] > 0
        hits = np.cumsum(relevant)
        ranks = np.arange(1, size + 1)
        precisions.append(float((hits / ranks)[relevant].sum() / relevant.sum()) if relevant.any() else 0.0)
        start += size
    return float(np.mean(precisions)) if precisions else float("nan")


# ---------------------------------------------------------------------------------------- the checks


def ranker_from(entry: dict[str, str], state: dict[str, Any], device: torch.device) -> Any:
    """The bundle's ranker, rebuilt by its class (named in the manifest: the registry and its
    catalogue are not on the node) and moved to ``device``."""
    module, _, qualname = entry["class"].partition(":")
    return getattr(importlib.import_module(module), qualname).from_state(state).to(str(device))


def on(device: torch.device, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: tensor.to(device) for name, tensor in inputs.items()}


def timed_predict(ranker: Any, inputs: dict[str, torch.Tensor], device: torch.device, passes: int) -> tuple[np.ndarray, float]:
    """Scores and pairs/s over ``passes`` passes after one warm-up (predict returns CPU arrays, so
    every pass ends synchronised)."""
    scores = ranker.predict(inputs)
    started = time.perf_counter()
    for _ in range(passes):
        ranker.predict(inputs)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = (time.perf_counter() - started) / passes
    return scores, len(scores) / seconds


def check_scores(
    part: dict[str, Any], ranker: Any, cpu_ranker: Any, device: torch.device, pools: dict[str, Any], passes: int
) -> dict[str, Any]:
    """fp32 against the bundle's CPU scores, autocast in bf16 and fp16 (reported), pairs/s."""
    inputs, reference = part["test"]["inputs"], part["test"]["scores"].numpy()
    scores, device_rate = timed_predict(ranker, inputs, device, passes)
    on_cpu = device.type == "cpu"  # --device cpu (the test suite): the device's run is the CPU's
    node_cpu_scores, cpu_rate = (scores, device_rate) if on_cpu else timed_predict(cpu_ranker, inputs, CPU, passes)
    reference_map = mean_average_precision(reference, pools)
    fp32 = {
        "max_abs_diff": float(np.abs(scores - reference).max()),
        "node_cpu_max_abs_diff": float(np.abs(node_cpu_scores - reference).max()),
        "map": mean_average_precision(scores, pools),
        "bundle_cpu_map": reference_map,
    }
    fp32["passed"] = fp32["max_abs_diff"] <= FP32_TOLERANCE
    autocast: dict[str, Any] = {}
    for dtype in AUTOCAST_DTYPES:
        name = str(dtype).removeprefix("torch.")
        try:
            with torch.autocast(device.type, dtype=dtype):
                mixed, mixed_rate = timed_predict(ranker, inputs, device, passes)
        except RuntimeError as error:  # an op without a kernel for this dtype on this device: reported
            autocast[name] = {"error": str(error).splitlines()[0]}
            continue
        autocast[name] = {
            "max_abs_diff": float(np.abs(mixed - reference).max()),
            "map_change": mean_average_precision(mixed, pools) - reference_map,
            "pairs_per_second": round(mixed_rate),
        }
    speed = {
        "pairs": len(scores),
        "device_pairs_per_second": round(device_rate),
        "cpu_pairs_per_second": round(cpu_rate),
        "speedup": round(device_rate / cpu_rate, 2),
    }
    return {"fp32": fp32, "autocast": autocast, "speed": speed}


def one_epoch(entry: dict[str, str], part: dict[str, Any], device: torch.device, dev_pools: dict[str, Any], seed: int) -> dict[str, Any]:
    """One epoch on ``device`` from the checkpoint's weights through the shared training loop, on the
    encoded TRAIN batches, dropout off so that the device's arithmetic is all that differs from the
    CPU's epoch; DEV MAP (numpy) after it."""
    ranker = ranker_from(entry, part["state"], device)
    model = ranker.model()
    for module in model.modules():  # the device's dropout masks come from another generator than the CPU's
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    train = part["train"]
    batches = ranker.batches(on(device, train["inputs"]), train["groups"], train["labels"])
    dev_inputs = part["dev"]["inputs"]
    report = loop.train(
        model,
        ranker.make_optimizer(model),
        ranker.loss(),
        batches,
        lambda: mean_average_precision(ranker.predict(dev_inputs), dev_pools),
        eval_every=len(batches) + 1,  # one check, at the end of the epoch
        max_epochs=1,
        patience=1,
        seed=seed,
        progress=False,
    )
    last = report["history"][-1]
    return {"loss": last["loss"], "dev_map": last["dev_map"], "batches": report["batches"], "seconds": report["seconds"]}


def check_epoch(entry: dict[str, str], part: dict[str, Any], device: torch.device, dev_pools: dict[str, Any], seed: int) -> dict[str, Any]:
    on_device = one_epoch(entry, part, device, dev_pools, seed)
    on_cpu = on_device if device.type == "cpu" else one_epoch(entry, part, CPU, dev_pools, seed)
    difference = 100 * abs(on_device["dev_map"] - on_cpu["dev_map"])
    passed = math.isfinite(on_device["loss"]) and difference <= EPOCH_MAP_POINTS
    # What the next seed's batch order alone does to DEV MAP: the scale the 1-point band sits on.
    other_seed = one_epoch(entry, part, CPU, dev_pools, seed + 1)
    spread = 100 * abs(other_seed["dev_map"] - on_cpu["dev_map"])
    return {"device": on_device, "cpu": on_cpu, "dev_map_difference_points": difference, "cpu_next_seed_difference_points": spread, "passed": passed}


def check_request(ranker: Any, request: dict[str, Any], reference: np.ndarray) -> dict[str, Any]:
    """The request path: ``score_pools`` of one question's pool from its texts, then ``explain`` of the
    best candidate; the pool's scores are also compared with the bundle's CPU scores of those rows."""
    candidates = [Candidate(**record) for record in request["candidates"]]
    scores = ranker.score_pools([(request["question"], candidates)])[0]
    best = ordering.order([c.doc_id for c in candidates], scores)[0]  # the rule's first, as Ask opens it
    explanation = ranker.explain(request["question"], candidates, best)
    difference = abs(float(explanation.score) - float(scores[best]))
    bundle_difference = float(np.abs(scores - reference).max())
    return {
        "question": request["question"],
        "candidates": len(candidates),
        "explained_index": best,
        "ranked_score": float(scores[best]),
        "explanation_score": float(explanation.score),
        "difference": difference,
        "max_abs_diff_to_bundle_cpu": bundle_difference,
        "passed": difference <= EXPLAIN_TOLERANCE and bundle_difference <= FP32_TOLERANCE,
    }


def provide_request_inputs(request: dict[str, Any]) -> None:
    """What the request path would compute with spaCy and the GloVe package, from the bundle: parses
    (memory level of the parse cache), spaCy token vectors and GloVe rows."""
    cache = nlp.default_cache()
    # The node has no spaCy to parse again: its memory level holds every parse brought (WikiQA's exceed
    # RERANK_LAB_MAX_PARSES' default).
    cache.memory_limit = max(cache.memory_limit, len(request["parses"]))
    cache.remember({nlp.text_key(text): nlp.decode(blob) for text, blob in request["parses"].items()})
    contextual.remember({text: rows.numpy() for text, rows in request["context"].items()})
    vectors.use_vectors({word: row.numpy() for word, row in request["glove"].items()})


def driver_version() -> str | None:
    """The NVIDIA driver, from nvidia-smi when there is one (torch does not say)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        return subprocess.run(query, capture_output=True, text=True, timeout=30, check=True).stdout.strip() or None
    return None


def run_check(bundle: Path, device: torch.device, out: Path, passes: int = TIMED_PASSES) -> dict[str, Any]:
    """Every check for every ranker of the bundle; writes and returns the result."""
    started = time.perf_counter()
    manifest = json.loads((bundle / MANIFEST).read_text())
    if manifest["format"] != BUNDLE_FORMAT:
        raise SystemExit(f"{bundle} is a bundle of format {manifest['format']}; this check reads {BUNDLE_FORMAT}")
    pools, request = load_part(bundle / POOLS), load_part(bundle / REQUEST)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RERANK_LAB_DATA", str(out / "data"))  # not the source tree's ./data (read-only on some nodes)
    provide_request_inputs(request)
    torch.manual_seed(manifest["seed"])
    rankers: dict[str, Any] = {}
    rows = slice(request["first_row"], request["first_row"] + len(request["candidates"]))
    for entry in manifest["rankers"]:
        part = load_part(bundle / entry["file"])
        try:
            ranker = ranker_from(entry, part["state"], device)
            cpu_ranker = ranker_from(entry, part["state"], CPU)
            result = check_scores(part, ranker, cpu_ranker, device, pools["test"], passes)
            result["epoch"] = check_epoch(entry, part, device, pools["dev"], manifest["seed"])
            result["request"] = check_request(ranker, request, part["test"]["scores"].numpy()[rows])
            result["passed"] = all(result[key]["passed"] for key in ("fp32", "epoch", "request"))
        except Exception:  # one GPU run is precious: record the failure and check the other rankers
            result = {"error": traceback.format_exc(limit=-3), "passed": False}
        rankers[entry["name"]] = result
        print(f"{entry['name']}: {'passed' if result['passed'] else 'FAILED'}", flush=True)
    payload = {
        "device": describe(device),
        "driver": driver_version() if device.type == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "fp32_precision": torch.backends.cudnn.conv.fp32_precision,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "bundle": {key: manifest[key] for key in ("data", "made", "total_bytes", "train_questions", "epochs")},
        "tolerances": {"fp32": FP32_TOLERANCE, "explain": EXPLAIN_TOLERANCE, "epoch_map_points": EPOCH_MAP_POINTS},
        "rankers": rankers,
        "passed": all(result["passed"] for result in rankers.values()),
        "seconds": round(time.perf_counter() - started, 1),
    }
    (out / RESULT).write_text(json.dumps(payload, indent=2) + "\n")
    return payload


SECTION_INTRO = """## GPU check

Script: `benchmarks/gpu_check.py`. The CUDA path of the neural rankers is verified by this check only
(the suite has no GPU). It last ran on 2026-11-26 on one NVIDIA H200: every ranker passed (rows below).

On a CPU machine with the whole project: `python benchmarks/gpu_check.py make --bundle gpu_bundle`
(WikiQA TEST, DEV, and 150 TRAIN questions; one checkpoint per neural ranker, trained one epoch).
Copy the source tree and `gpu_bundle/` to the node; there, with only Python, torch, numpy, pandas,
scipy and scikit-learn: `python benchmarks/gpu_check.py run --bundle gpu_bundle --device cuda --out
out` (exit status 0 when every ranker passed; `out/gpu_check.json` holds everything). Then, back here,
`python benchmarks/gpu_check.py report --result out/gpu_check.json [--result more.json]` and
`python benchmarks/report.py` put the rows below. Per ranker it checks: fp32 scores on the device
against the bundle's CPU scores (largest difference <= 1e-4); autocast bfloat16 and float16
(difference, TEST MAP change and pairs/s, reported); pairs/s on the device and on the node's CPU in
the same run; one training epoch from the checkpoint on the bundle's encoded TRAIN batches on the
device and on the CPU (loss finite, DEV MAP within 1 point); the request path of one TEST question
(`score_pools`, then `explain` of the best candidate: its score equals the ranked score within 1e-5).
`tests/test_gpu_check.py` makes a small demo bundle and runs the check with `--device cpu` in a Python
that holds only the node's packages.

**float32 is IEEE float32 on CUDA** (`qa_core.device.use_fp32_precision`). torch's default lets cuDNN
run convolutions and RNNs in TF32; the first H200 run failed compare-aggregate that way (scores 3e-4
from the CPU's, an explanation's score 4.4e-5 from its ranked score). `--fp32-precision tf32` measures
what TF32 would do (second table): four of seven rankers fail the tolerances, and it is what makes
mphcnn's convolutions fast. IEEE float32 on the H200 is slower than the node's CPU for mphcnn (about
500 pairs/s) and for the two overlap CNNs; autocast is 7 to 146 times faster there, at a TEST MAP
change of at most 0.41 points. So on a GPU, `RERANK_LAB_AMP=1` is the fast setting and float32 the
exact one; AMP stays off by default, so that every score and explanation is the CPU's to 1e-6.

Since the H200 run, the other explainers (Integrated Gradients, gradient x input, occlusion) come
from Captum (issue 38), which imports matplotlib and tqdm and so cannot be imported on such a node;
the check explains each ranker through its own weights (attention, or the gradient norm, one
`torch.autograd.grad` call), which need no Captum, so every ranker is still explained there.

Known limits: the epoch starts from the bundle's checkpoint and runs with dropout off (the device's
dropout masks would come from the CUDA generator, the CPU's from another: with dropout on, mphcnn's
H200 epoch ended 1.6 DEV MAP points from the CPU's, while the CPU's own next seed moved it 2.8); the
two epochs still differ in summation order, hence the 1-point band, and the table gives what the next
seed's batch order does on the CPU beside it. The bundle's checkpoints read question analysis from the
wh-word rules (no class CNN or focus tagger is trained for it), so those two classifiers are not part
of what is checked. TRAIN is a seeded sample of 150 questions to keep the bundle under 50 MiB
(compare-aggregate's spaCy token vectors are most of it). Pairs/s come from three passes over the
2,351 TEST pairs, so they move by up to a factor of two between runs on the same machine.
"""


def section(results: Sequence[dict[str, Any]]) -> list[str]:
    """The docs' section: what the check is, and one table per run."""
    lines = [SECTION_INTRO]
    for result in results:
        lines += run_table(result)
    return lines


def run_table(result: dict[str, Any]) -> list[str]:
    bundle = result["bundle"]
    lines = [
        f"### {result['device']}, {result['date'][:10]}, float32 as {result.get('fp32_precision', 'ieee')}",
        "",
        f"Driver {result['driver'] or '-'}, CUDA {result['cuda'] or '-'}, torch {result['torch']}, Python {result['python']}; "
        f"bundle: {bundle['data']}, {bundle['total_bytes'] / 2**20:.1f} MiB, made {bundle['made'][:10]}; "
        f"{result['seconds']:.0f} s in all; {'every ranker passed' if result['passed'] else 'NOT every ranker passed'}.",
        "",
        "| ranker | fp32 max diff | bf16 diff / MAP change / pairs/s | fp16 diff / MAP change / pairs/s | device pairs/s "
        "| CPU pairs/s | epoch loss | DEV MAP device / CPU | CPU next seed, points | explain diff | passed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, checks in result["rankers"].items():
        if "error" in checks:
            lines.append(f"| `{name}` | error: {checks['error'].splitlines()[-1]} ||||||||| no |")
            continue
        mixed = [
            f"{c['max_abs_diff']:.1e} / {100 * c['map_change']:+.2f} / {c.get('pairs_per_second', 0):,}"
            if "max_abs_diff" in c
            else "no kernel"
            for c in (checks["autocast"]["bfloat16"], checks["autocast"]["float16"])
        ]
        speed, epoch = checks["speed"], checks["epoch"]
        lines.append(
            f"| `{name}` | {checks['fp32']['max_abs_diff']:.1e} | {mixed[0]} | {mixed[1]} | "
            f"{speed['device_pairs_per_second']:,} | {speed['cpu_pairs_per_second']:,} | {epoch['device']['loss']:.4f} | "
            f"{epoch['device']['dev_map']:.4f} / {epoch['cpu']['dev_map']:.4f} | "
            f"{epoch.get('cpu_next_seed_difference_points', float('nan')):.2f} | "
            f"{checks['request']['difference']:.1e} | {'yes' if checks['passed'] else 'no'} |"
        )
    notes = [
        "MAP changes in points (x100) of TEST MAP against the bundle's CPU scores; the checkpoints are trained "
        "one epoch on 150 questions, to be checked, not to rank well."
    ]
    if result["device"] == "CPU":
        notes.append(
            "With `--device cpu` the device's columns are the CPU's own run (done once): these rows show the "
            "check working and the autocast differences on a CPU, nothing about CUDA."
        )
    return [*lines, "", " ".join(notes), ""]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make", help="write the bundle (on a machine with the whole project)")
    make.add_argument("--bundle", type=Path, required=True)
    make.add_argument("--data", choices=("demo", "wikiqa"), default="wikiqa")
    make.add_argument("--train-questions", type=int, default=None, help="TRAIN questions (default: demo all, WikiQA 150)")
    make.add_argument("--eval-questions", type=int, default=None, help="DEV and TEST questions each (default: all)")
    make.add_argument("--epochs", type=int, default=1, help="training epochs of each checkpoint")
    make.add_argument("--seed", type=int, default=1)
    run = commands.add_parser("run", help="run the checks (on the GPU node)")
    run.add_argument("--bundle", type=Path, required=True)
    run.add_argument("--device", default="cuda", help="cuda, cuda:1 or cpu")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--passes", type=int, default=TIMED_PASSES, help="timed scoring passes per device")
    run.add_argument(
        "--fp32-precision", choices=("ieee", "tf32"), default="ieee",
        help="ieee: what the app runs; tf32: torch's cuDNN default, to measure what it would change",
    )
    report = commands.add_parser("report", help="write the docs' section (benchmarks/results/gpu_check.md)")
    report.add_argument(
        "--result", type=Path, action="append", default=[], help="a run's gpu_check.json, one table each (none: the text)"
    )
    args = parser.parse_args(argv)
    if args.command == "report":
        path = ROOT / "benchmarks" / "results" / "gpu_check.md"
        path.write_text("\n".join(section([json.loads(result.read_text()) for result in args.result])))
        print(path)
        return 0
    if args.command == "make":
        from benchmarks.gpu_bundle import make_bundle  # the whole project: only where the bundle is made

        manifest = make_bundle(args.bundle, args.data, args.train_questions, args.eval_questions, args.epochs, args.seed)
        print(f"{args.bundle}: {manifest['total_bytes'] / 2**20:.1f} MiB, {len(manifest['rankers'])} rankers")
        return 0
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda, but torch sees no CUDA device here")
    use_fp32_precision(args.fp32_precision)
    result = run_check(args.bundle, device, args.out, args.passes)
    print(f"{args.out / RESULT}: {'passed' if result['passed'] else 'FAILED'} in {result['seconds']} s")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
