"""Shared benchmark plumbing: the shared data, machine description, result files."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qa_core import config  # noqa: E402
from qa_core.data.importers import load_trecqa, load_wikiqa  # noqa: E402
from qa_core.types import Dataset  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "gpu": gpu,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "date": dt.date.today().isoformat(),
    }


def shared_datasets() -> dict[str, Dataset]:
    """TrecQA and WikiQA from ../shared/data; exits with a clear message when absent."""
    root = config.shared_data_dir()
    if root is None:
        sys.exit("benchmarks need the shared data folder (../shared/data or RERANK_LAB_SHARED_DATA)")
    return {"trecqa": load_trecqa(root / "trecqa"), "wikiqa": load_wikiqa(root / "wikiqa")}


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (1..99) of ``values``, inclusive method; a single value is every percentile."""
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def wikiqa_path() -> Path:
    """The shared WikiQA folder the timing benchmarks read; exits with a clear message when absent."""
    root = config.shared_data_dir()
    if root is None or not (root / "wikiqa").is_dir():
        sys.exit("this benchmark needs ../shared/data/wikiqa (or RERANK_LAB_SHARED_DATA)")
    return root / "wikiqa"



def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def write_result(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path


def read_results(pattern: str) -> list[dict[str, Any]]:
    """Every result file matching ``pattern`` (e.g. ``ranker_*``), by file name."""
    return [json.loads(path.read_text()) for path in sorted(RESULTS.glob(f"{pattern}.json"))]


def machine_line(m: dict[str, Any]) -> str:
    return (f"{m['cpu']}, {m['cores']} cores, GPU: {m['gpu'] or 'none'}; Python {m['python']}, "
            f"torch {m['torch']}; run on {m['date']}")


def load_note(part: dict[str, Any]) -> str:
    """A sentence giving the 1-minute load average a timed part recorded when it started (none if not)."""
    load = part.get("load_average")
    return f" Load average when it started: {load:.1f}." if load is not None else ""


def write_section(name: str, lines: list[str]) -> Path:
    """A markdown section of docs/benchmarks.md (``report.py`` joins the sections in ``SECTION_ORDER``)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.md"
    path.write_text("\n".join(lines).rstrip() + "\n")
    return path


def measure_or_render(name: str, description: str, measure: Callable[[], dict[str, Any]],
                      render_section: Callable[[dict[str, Any]], list[str]], *, machine_footer: bool = True) -> None:
    """The command line of a benchmark without settings: measure, save ``<name>.json`` and its
    section, or with ``--render`` only rewrite the section from the saved results. The section ends
    with the machine the results were measured on (``results["machine"]``) unless ``machine_footer``
    is off (a section that says more about its run there)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--render", action="store_true", help="only rewrite the markdown from the saved results")
    args = parser.parse_args()
    results = json.loads((RESULTS / f"{name}.json").read_text()) if args.render else measure()
    if not args.render:
        print(write_result(name, results))
    lines = render_section(results)
    if machine_footer:
        lines += ["", f"Machine: {machine_line(results['machine'])}."]
    print(write_section(name, lines))
