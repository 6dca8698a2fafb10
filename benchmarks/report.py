"""Render docs/benchmarks.md from benchmarks/results/*.json (each file names its machine and date)."""

from __future__ import annotations

import json

from common import RESULTS, ROOT

PUBLISHED = {
    "trecqa": [
        ("SM-CNN, TRAIN (Severyn & Moschitti 2015, published)", "raw", 0.7329, 0.7962),
        ("SM-CNN, TRAIN-ALL (Severyn & Moschitti 2015, published)", "raw", 0.7459, 0.8078),
        ("SM-CNN re-implemented, TRAIN-ALL (Nicosia 2018)", "clean", 0.7654, 0.8186),
    ],
    "wikiqa": [
        ("SM-CNN re-implemented (Nicosia 2018)", "filtered", 0.6951, 0.7107),
        ("CNN_WO+SO (Nicosia 2018)", "filtered", 0.7224, 0.7391),
        ("best listed (Wang & Jiang 2017)", "filtered", 0.7433, 0.7540),
    ],
}


def fmt(value: float) -> str:
    return f"{value:.4f}"


def smcnn_section(result: dict) -> list[str]:
    m = result["machine"]
    lines = [
        "## SM-CNN and baselines on TrecQA and WikiQA",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, GPU: {m['gpu'] or 'none'}; Python {m['python']}, "
        f"torch {m['torch']}; run on {m['date']}. Script: `benchmarks/smcnn.py` "
        f"(seeds {', '.join(map(str, result['seeds']))}), table by `benchmarks/report.py`.",
        "",
        "Setup: train on TRAIN, select on DEV MAP (checked every 10 mini-batches), report TEST. "
        "Deviations from the paper: GloVe 6B 50d instead of the paper's word2vec 50d vectors; "
        "TrecQA TRAIN (94 questions), not TRAIN-ALL; spaCy tokenisation. WikiQA as shipped has "
        "questions without a correct answer removed (the common 'filtered' setting), so its raw rows "
        "are the filtered setting; clean also drops questions whose candidates are all correct. "
        "Raw TrecQA keeps questions without a correct answer (AP 0, trec_eval semantics).",
        "",
    ]
    for name, entry in result["datasets"].items():
        lines += [f"### {name} TEST", "",
                  "| system | setting | MAP | MRR | P@1 | nDCG@10 | questions |",
                  "|---|---|---|---|---|---|---|"]
        for baseline, scores in entry["baselines"].items():
            for mode in ("raw", "clean"):
                s = scores[mode]
                lines.append(f"| {baseline} | {mode} | {fmt(s['map'])} | {fmt(s['mrr'])} | "
                             f"{fmt(s['p@1'])} | {fmt(s['ndcg@10'])} | {s['questions']} |")
        for mode in ("raw", "clean"):
            agg = entry[f"smcnn_{mode}"]
            cells = " | ".join(f"{fmt(agg[k][0])} ± {fmt(agg[k][1])}" for k in ("map", "mrr", "p@1", "ndcg@10"))
            questions = entry["smcnn"][0][mode]["questions"]
            lines.append(f"| **SM-CNN (ours, mean ± std over {len(entry['smcnn'])} seeds)** | {mode} | {cells} | {questions} |")
        for label, setting, map_, mrr in PUBLISHED.get(name, []):
            lines.append(f"| {label} | {setting} | {fmt(map_)} | {fmt(mrr)} | | | |")
        seconds = [r["train_seconds"] for r in entry["smcnn"]]
        lines += ["", f"SM-CNN training time per seed: {min(seconds):.0f}-{max(seconds):.0f} s on CPU; "
                  f"spaCy parse of the whole dataset (once, then cached): {entry['parse_seconds']} s.", ""]
        lines += ["| seed | dev MAP | test MAP raw | test MAP clean | best epoch | seconds |", "|---|---|---|---|---|---|"]
        for r in entry["smcnn"]:
            lines.append(f"| {r['seed']} | {fmt(r['dev_map'])} | {fmt(r['raw']['map'])} | "
                         f"{fmt(r['clean']['map'])} | {r['best_epoch']} | {r['train_seconds']} |")
        lines.append("")
    return lines


def main() -> None:
    lines = ["# Benchmarks", "", "Produced by the scripts in `benchmarks/`; every section names its machine and date.", ""]
    smcnn = RESULTS / "smcnn.json"
    if smcnn.exists():
        lines += smcnn_section(json.loads(smcnn.read_text()))
    (ROOT / "docs" / "benchmarks.md").write_text("\n".join(lines) + "\n")
    print(ROOT / "docs" / "benchmarks.md")


if __name__ == "__main__":
    main()
