"""Join the sections the benchmark scripts wrote (benchmarks/results/*.md) into docs/benchmarks.md.

Each script renders its own section from its own result files, naming machine and date, so adding a
benchmark never means editing this file; ``SECTION_ORDER`` only fixes where known sections go
(unknown ones follow, alphabetically).
"""

from __future__ import annotations

from common import RESULTS, ROOT

SECTION_ORDER = (
    "rankers", "stacking", "compare_aggregate", "classifiers", "semantic_overlap", "structure", "speed", "reliability",
    "learning_loop",
)


def main() -> None:
    sections = {path.stem: path.read_text() for path in RESULTS.glob("*.md")}
    order = [name for name in SECTION_ORDER if name in sections] + sorted(set(sections) - set(SECTION_ORDER))
    lines = ["# Benchmarks", "", "Produced by the scripts in `benchmarks/`; every section names its machine and date.", ""]
    text = "\n".join(lines) + "\n" + "\n".join(sections[name] for name in order)
    (ROOT / "docs" / "benchmarks.md").write_text(text)
    print(ROOT / "docs" / "benchmarks.md")


if __name__ == "__main__":
    main()
