"""Compile ranx's numba functions once per install, as ``scripts/setup.sh``'s last install step.

ranx compiles its functions with numba on first use and caches the machine code beside its sources
(``cache=True``). In a new environment the first process to fuse runs spends most of a minute
compiling (measured: 52 s for a two-run fusion and its MAP, then 9 s in every later process), and so
does every process that starts before the cache is written: the app's first fusion, each training
job of the fusion ranker, and each test worker. Fusing a tiny pair of runs here, through
``qa_core.fusion`` as the app does, writes the cache before any of them starts.
"""

from __future__ import annotations

from qa_core.fusion import METHODS, apply_fusion, fuse, tune_fusion, znorm


def main() -> None:
    runs = {
        "first": {f"q{q}": {f"d{d}": float((q + d) % 3) for d in range(3)} for q in range(3)},
        "second": {f"q{q}": {f"d{d}": float(d) for d in range(3)} for q in range(3)},
    }
    qrels = {f"q{q}": {f"d{d}": int(d == q) for d in range(3)} for q in range(3)}
    for method in METHODS:
        apply_fusion(tune_fusion(method, runs, qrels), runs)
    fuse(runs, {"first": 0.5, "second": 0.5})
    fuse(runs, {"first": 1.0})
    znorm(runs["first"])


if __name__ == "__main__":
    main()
