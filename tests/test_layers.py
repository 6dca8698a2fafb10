"""The one-way layers of docs/architecture.md are enforced: `lint-imports` (import-linter, run by
`make test`) passes on the tree and fails on a copy with an upward import, an import cycle, or a page
or CLI module reaching the store without the services' front doors."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

LINT = Path(sys.executable).parent / "lint-imports"


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--no-cache", "--config", str(root / ".importlinter")],
        cwd=root, capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    for package in ("qa_core", "db", "pages"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "*.jsonl"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


def test_the_tree_keeps_its_layers() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "module, line, contract",
    [
        ("qa_core/text/nlp.py", "import qa_core.services.model_loading", "The library imports no service"),
        ("qa_core/rankers/smcnn.py", "import streamlit", "The library imports no service"),
        ("db/store.py", "import qa_core.services.jobs", "Pages over the CLI over the app services over the store"),
        ("qa_core/rankers/base.py", "import qa_core.rankers.registry", "No import cycles"),
        ("pages/6_Audit.py", "import db.users", "Pages and the CLI reach the store only through"),
        ("qa_core/cli/admin.py", "from db.store import Store", "Pages and the CLI reach the store only through"),
    ],
    ids=["library-to-service", "library-to-streamlit", "store-to-service", "registry-cycle", "page-to-store",
         "cli-to-store"],
)
def test_an_upward_import_or_a_cycle_fails(tree_copy: Path, module: str, line: str, contract: str) -> None:
    path = tree_copy / module
    path.write_text(path.read_text() + f"\n{line}  # injected by the test\n")
    result = lint(tree_copy)
    assert result.returncode != 0
    assert contract in result.stdout and "BROKEN" in result.stdout
