"""What a page keys its loaded rankers and whole-split runs by (``model_loading.current_version``):
each source gives its own key, and the key changes when what scores changes: a new run file, a
service's URL or version (a trained version's key: ``tests/test_jobs.py``). One SQLite store, no
model is scored: cheap."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.services import model_loading, systems
from qa_core.services.model_loading import VersionInUse


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(f"sqlite:///{tmp_path / 'keys.sqlite'}")
    store.datasets.import_dataset(load_demo())
    yield store
    store.close()


def _run(store: Store, path: Path, top: int) -> Path:
    """A run of the first TEST question that puts candidate ``top`` first."""
    question = store.datasets.load_dataset("demo").split("test")[0]
    path.write_text("".join(f"{question.qid} Q0 {c.doc_id} 1 {float(i == top)} ext\n"
                            for i, c in enumerate(question.candidates)))
    return path


def _key(store: Store, name: str) -> str | None:
    return model_loading.current_version(store, name, "demo").key


def test_a_new_run_file_service_url_or_service_version_changes_the_key(store: Store, tmp_path: Path) -> None:
    systems.add_run(store, _run(store, tmp_path / "a.run", 0), "demo", "ext")
    first = _key(store, "system:ext")
    assert first is not None and _key(store, "system:ext") == first  # the same run: the same key
    systems.remove(store, "ext")
    systems.add_run(store, _run(store, tmp_path / "b.run", 1), "demo", "ext")  # another file under the same name
    assert _key(store, "system:ext") != first

    keys = []
    for url, version in (("http://127.0.0.1:9/a", "1"), ("http://127.0.0.1:9/a", "2"), ("http://127.0.0.1:9/b", "2")):
        store.systems.add_system("svc", "service", url=url, info={"name": "overlap", "version": version})
        keys.append(_key(store, "system:svc"))
        systems.remove(store, "svc")
    assert len(set(keys)) == 3, keys


def test_a_baseline_or_an_untrained_model_has_no_version_to_key(store: Store) -> None:
    assert model_loading.current_version(store, "bm25", "demo") == VersionInUse()
    assert model_loading.current_version(store, "smcnn", "demo") == VersionInUse()  # nothing trained yet


def test_the_train_command_quotes_the_dataset_name() -> None:
    command = model_loading.train_command("smcnn", "my data; rm -rf x")
    assert shlex.split(command) == ["python", "-m", "qa_core", "train", "--model", "smcnn", "--data", "my data; rm -rf x"]
    assert model_loading.train_command("smcnn") == "python -m qa_core train --model smcnn --data DATASET"
