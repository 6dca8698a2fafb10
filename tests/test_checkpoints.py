"""Checkpoints hold tensors and plain data only: a file made to run code, a foreign file, or one
whose content does not fit the model (empty state, an unknown config field, other tensor shapes)
is refused with a clear ``InputError``, nothing in it runs, and the registry's previous version
is used instead. Files written the way this project always wrote them still load."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from db.base import NewVersion, insert_model_version
from db.store import Store
from qa_core.checkpoints import CHECKPOINT_FORMAT, Registration, load_checkpoint
from qa_core.data.demo import load_demo
from qa_core.rankers import registry
from qa_core.services.experiments import train_ranker
from qa_core.services.jobs import load_promoted
from qa_core.types import InputError
from tests import ROOT


class RunsCode:
    """Unpickling this calls ``open(marker, "w")``: the file appears only if the payload ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str, str]]:
        return open, (str(self.marker), "w")


def write_payload(path: Path, payload: Any) -> Path:
    """``torch.save`` of anything, as an attacker (or an older program) would write it."""
    torch.save(payload, path)
    return path


@pytest.fixture(scope="module")
def smcnn_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real SM-CNN checkpoint (one epoch on the demo corpus)."""
    path = tmp_path_factory.mktemp("smcnn") / "smcnn.pt"
    train_ranker("smcnn", load_demo(), progress=False, checkpoint=path, model_config={"max_epochs": 1})
    return path


def smcnn_state(smcnn_file: Path) -> dict[str, Any]:
    kind, state = load_checkpoint(smcnn_file)
    assert kind == "smcnn"
    return state


def test_a_payload_that_runs_code_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = write_payload(tmp_path / "evil.pt", {"format": CHECKPOINT_FORMAT, "kind": "smcnn",
                                                "state": {"config": RunsCode(marker)}})
    with pytest.raises(InputError, match="refused") as caught:
        registry.load(evil)
    assert "evil.pt" in str(caught.value) and "corrupt" not in str(caught.value)
    assert not marker.exists()


def test_evaluate_refuses_a_code_running_checkpoint_given_as_a_path(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = write_payload(tmp_path / "evil.pt", RunsCode(marker))
    env = {**os.environ, "RERANK_LAB_DATA": str(tmp_path / "data"), "RERANK_LAB_DB": f"sqlite:///{tmp_path / 's.sqlite'}"}
    subprocess.run([sys.executable, "-m", "qa_core", "data", "demo"], cwd=ROOT, env=env, check=True, capture_output=True)
    result = subprocess.run([sys.executable, "-m", "qa_core", "evaluate", "--model", str(evil), "--data", "demo"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and "refused" in result.stderr and "Traceback" not in result.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(lambda path: [1, 2, 3], id="not-a-dict"),
        pytest.param(lambda path: {"kind": "smcnn", "state": {}}, id="no-format"),
        pytest.param(lambda path: {"format": 99, "kind": "smcnn", "state": {}}, id="future-format"),
        pytest.param(lambda path: {"format": CHECKPOINT_FORMAT, "kind": 7, "state": {}}, id="kind-not-text"),
        pytest.param(lambda path: {"format": CHECKPOINT_FORMAT, "kind": "smcnn", "state": None}, id="state-not-a-dict"),
        pytest.param(lambda path: {"format": CHECKPOINT_FORMAT, "kind": "nosuch", "state": {}}, id="unknown-kind"),
    ],
)
def test_foreign_checkpoints_are_refused(tmp_path: Path, payload: Callable[[Path], Any]) -> None:
    path = write_payload(tmp_path / "foreign.pt", payload(tmp_path))
    with pytest.raises(InputError, match="foreign.pt"):
        registry.load(path)


def _no_state(state: dict[str, Any]) -> dict[str, Any]:
    return {}


def _extra_config_field(state: dict[str, Any]) -> dict[str, Any]:
    return {**state, "config": {**state["config"], "added_in_a_later_version": 3}}


def _other_shapes(state: dict[str, Any]) -> dict[str, Any]:
    weights = dict(state["model"])
    name = next(key for key, tensor in weights.items() if tensor.dim() == 2 and "embedding" not in key)
    weights[name] = torch.zeros(weights[name].shape[0] + 1, weights[name].shape[1])
    return {**state, "model": weights}


def _missing_weights(state: dict[str, Any]) -> dict[str, Any]:
    weights = dict(state["model"])
    weights.pop(next(iter(weights)))
    return {**state, "model": weights}


def _vocabulary_not_a_list(state: dict[str, Any]) -> dict[str, Any]:
    return {**state, "vocabulary": 12}


UNFITTING = {
    "empty-state": (_no_state, "KeyError"),
    "extra-config-field": (_extra_config_field, "added_in_a_later_version"),
    "other-tensor-shapes": (_other_shapes, "size mismatch"),
    "missing-weights": (_missing_weights, "Missing key"),
    "vocabulary-not-a-list": (_vocabulary_not_a_list, "TypeError"),
}


@pytest.mark.parametrize("name", sorted(UNFITTING))
def test_unfitting_content_is_one_clear_input_error(smcnn_file: Path, tmp_path: Path, name: str) -> None:
    change, needle = UNFITTING[name]
    path = write_payload(tmp_path / "changed.pt", {"format": CHECKPOINT_FORMAT, "kind": "smcnn",
                                                   "state": change(smcnn_state(smcnn_file))})
    with pytest.raises(InputError) as caught:
        registry.load(path)
    message = str(caught.value)
    assert "changed.pt" in message and "does not fit" in message and needle in message
    assert "\n" not in message


@pytest.mark.parametrize("fault", ["runs-code", "empty-state", "extra-config-field", "other-tensor-shapes"])
def test_the_previous_version_is_used_when_the_promoted_one_is_refused(
    store: Store, smcnn_file: Path, tmp_path: Path, models_dir: Path, fault: str
) -> None:
    marker = tmp_path / "ran"
    state = smcnn_state(smcnn_file)
    bad_state = {"config": RunsCode(marker)} if fault == "runs-code" else UNFITTING[fault][0](state)
    bad = write_payload(models_dir / "v2.pt", {"format": CHECKPOINT_FORMAT, "kind": "smcnn", "state": bad_state})
    store.models.register_model("smcnn", NewVersion("smcnn", shutil.copy(smcnn_file, models_dir), {"dataset": "demo"}, {}, promote=True))
    store.models.register_model("smcnn", NewVersion("smcnn", bad, {"dataset": "demo"}, {}, promote=True))

    loaded = load_promoted(store, "smcnn", "demo")
    assert loaded.version["version"] == 1 and loaded.wanted["version"] == 2
    assert "version 2" in loaded.notice and "v2.pt" in loaded.notice
    assert not marker.exists()
    question = load_demo().split("test")[0]
    expected = registry.load(smcnn_file).score(question.text, question.candidates)
    np.testing.assert_allclose(loaded.ranker.score(question.text, question.candidates), expected)


def test_a_checkpoint_written_the_old_way_still_loads(smcnn_file: Path, tmp_path: Path) -> None:
    """Before the weights-only loader, ``save_checkpoint`` was a plain ``torch.save`` of this dict
    (with the pickle protocol torch picks); such files keep loading, scores unchanged."""
    ranker = registry.load(smcnn_file)
    old = tmp_path / "old.pt"
    with old.open("wb") as handle:
        torch.save({"format": 1, "kind": "smcnn", "state": ranker.state()}, handle)
    question = load_demo().split("test")[0]
    np.testing.assert_allclose(registry.load(old).score(question.text, question.candidates),
                               ranker.score(question.text, question.candidates))


def test_numpy_arrays_are_refused_not_unpickled(tmp_path: Path) -> None:
    """The tree kernel once stored numpy arrays; the loader never unpickles numpy objects (they
    are not on its allow-list), so such a file is refused with the same clear message."""
    path = write_payload(tmp_path / "tk-old.pt", {"format": 1, "kind": "tree_kernel",
                                                  "state": {"dual_coef": np.zeros(3)}})
    with pytest.raises(InputError, match="refused"):
        registry.load(path)


def test_a_file_that_is_not_the_registered_model_is_refused_and_only_its_own_kind_and_dataset_fall_back(
    store: Store, smcnn_file: Path, models_dir: Path
) -> None:
    """Issue 33: a cnn_wo checkpoint copied over the promoted smcnn file was served as smcnn."""
    other_kind = {"format": CHECKPOINT_FORMAT, "kind": "cnn_wo", "name": "cnn_wo", "state": smcnn_state(smcnn_file)}
    copied = models_dir / "v2.pt"
    copied.write_bytes(smcnn_file.read_bytes())
    store.models.register_model("smcnn", NewVersion("smcnn", shutil.copy(smcnn_file, models_dir), {"dataset": "demo"}, {}, promote=True))
    store.models.register_model("smcnn", NewVersion("smcnn", models_dir / "stray.pt", {"dataset": "demo"}, {}))  # another kind's file
    store.models.register_model("smcnn", NewVersion("smcnn", models_dir / "elsewhere.pt", {"dataset": "other"}, {}))
    store.models.register_model("smcnn", NewVersion("smcnn", copied, {"dataset": "demo"}, {}, promote=True))
    write_payload(models_dir / "stray.pt", other_kind)  # after its registration: no hash kept for it
    write_payload(models_dir / "elsewhere.pt", {**other_kind, "kind": "smcnn", "name": "smcnn"})
    write_payload(copied, other_kind)

    loaded = load_promoted(store, "smcnn", "demo")
    assert (loaded.wanted["version"], loaded.version["version"]) == (4, 1)
    assert "v2.pt is not the file registered as version id 4 of model 'smcnn'" in loaded.notice
    assert "its content changed since" in loaded.notice
    with pytest.raises(InputError, match=r"stray.pt holds model 'cnn_wo' \(a 'cnn_wo' model\), but the store "
                                         r"registered it as version id 2 of model 'smcnn'"):
        registry.load(models_dir / "stray.pt", Registration.of(store.models.model_version(2)))
    store.models.promote("smcnn", 2, "demo")  # now the stray file is wanted: refused, and 'elsewhere' (other data) is no fallback
    loaded = load_promoted(store, "smcnn", "demo")
    assert loaded.version["version"] == 1
    assert "holds model 'cnn_wo'" in loaded.notice


def test_a_raw_pickle_is_reported_as_one(tmp_path: Path) -> None:
    path = tmp_path / "raw.pt"
    path.write_bytes(pickle.dumps({"format": 1, "kind": "smcnn", "state": {}}))
    with pytest.raises(InputError, match="raw.pt is a raw Python pickle, not a Rerank Lab checkpoint"):
        registry.load(path)


def test_a_registered_checkpoint_records_its_version_id_and_another_versions_file_is_refused(
    store: Store, smcnn_file: Path, models_dir: Path
) -> None:
    first = models_dir / "v1.pt"
    first.write_bytes(smcnn_file.read_bytes())
    v1 = store.models.register_model("smcnn", NewVersion("smcnn", first, {"dataset": "demo"}, {}, promote=True))
    assert torch.load(first, weights_only=True)["version_id"] == v1
    late = models_dir / "v2.pt"
    v2 = store.models.register_model("smcnn", NewVersion("smcnn", late, {"dataset": "demo"}, {}))  # its file comes later: no hash
    late.write_bytes(first.read_bytes())
    with pytest.raises(InputError, match=f"v2.pt is version id {v1} of model 'smcnn', but the store registered it "
                                         f"as version id {v2} of model 'smcnn'"):
        registry.load(late, Registration.of(store.models.model_version(v2)))
    assert registry.load(first, Registration.of(store.models.model_version(v1))).name == "smcnn"


def test_a_registration_that_does_not_commit_leaves_the_checkpoint_as_it_was(
    store: Store, smcnn_file: Path, models_dir: Path
) -> None:
    """The version id is written into the file only once the registration commits: a job whose
    claim was lost, or any rollback, leaves the file byte for byte as it was, and no temporary."""
    path = models_dir / "job.pt"
    path.write_bytes(smcnn_file.read_bytes())
    job_id = store.jobs.create_job("smcnn", "demo", {})
    store.jobs.start_job(job_id)
    assert store.jobs.fail_job(job_id, "declared dead") is True
    with pytest.raises(InputError, match="no longer running"):
        store.jobs.finish_job(job_id, NewVersion("smcnn", path, {}, {}))
    assert path.read_bytes() == smcnn_file.read_bytes()
    with pytest.raises(RuntimeError, match="after the insert"), store.session_scope() as session:
        insert_model_version(session, "smcnn", NewVersion("smcnn", path, {}, {}), None)
        raise RuntimeError("after the insert")
    assert path.read_bytes() == smcnn_file.read_bytes()
    assert sorted(p.name for p in models_dir.iterdir()) == ["job.pt"]
    version_id = store.models.register_model("smcnn", NewVersion("smcnn", path, {}, {}))
    assert torch.load(path, weights_only=True)["version_id"] == version_id
    assert registry.load(path, Registration.of(store.models.model_version(version_id))).name == "smcnn"


def test_a_file_registered_again_under_another_spelling_keeps_its_first_stamp(
    store: Store, smcnn_file: Path, models_dir: Path
) -> None:
    first = models_dir / "v1.pt"
    first.write_bytes(smcnn_file.read_bytes())
    v1 = store.models.register_model("smcnn", NewVersion("smcnn", first, {}, {}))
    (models_dir / "link.pt").symlink_to(first)
    v2 = store.models.register_model("smcnn", NewVersion("smcnn", models_dir / "link.pt", {}, {}))
    v3 = store.models.register_model("smcnn", NewVersion("smcnn", f"{models_dir}/./v1.pt", {}, {}))
    assert torch.load(first, weights_only=True)["version_id"] == v1
    for version_id in (v1, v2, v3):
        assert registry.load(first, Registration.of(store.models.model_version(version_id))).name == "smcnn"


@pytest.mark.parametrize("held", [{"kind": "cnn_wo", "name": "cnn_wo"}, {"kind": "smcnn", "name": "smcnn_wikiqa"}])
def test_registration_refuses_a_checkpoint_of_another_model_in_one_sentence(
    store: Store, smcnn_file: Path, models_dir: Path, held: dict[str, str]
) -> None:
    """Issue 45: a cnn_wo checkpoint was registered and promoted as smcnn (loading refused it only
    later); a job's result is refused the same way, and the job registers nothing."""
    path = write_payload(models_dir / "other.pt", {"format": CHECKPOINT_FORMAT, **held, "state": smcnn_state(smcnn_file)})
    before = path.read_bytes()
    with pytest.raises(InputError) as caught:
        store.models.register_model("smcnn", NewVersion("smcnn", path, {"dataset": "demo"}, {}, promote=True))
    message = str(caught.value)
    assert message == (f"checkpoint {path} holds model {held['name']!r} (a {held['kind']!r} model), not model "
                       "'smcnn' (a 'smcnn' model); nothing was registered")
    assert store.models.model_versions() == [] and store.models.promoted_model("smcnn", "demo") is None
    assert path.read_bytes() == before  # not stamped

    store.datasets.import_dataset(load_demo())
    job = store.jobs.start_job(store.jobs.create_job("smcnn", "demo", {"promote": True}))
    with pytest.raises(InputError, match="nothing was registered"):
        store.jobs.finish_job(job["id"], NewVersion("smcnn", path, {"dataset": "demo"}, {}, promote=True), claim=job["claim"])
    assert store.models.model_versions() == [] and store.jobs.job(job["id"])["status"] == "running"
    registered = store.models.register_model("smcnn", NewVersion("smcnn", shutil.copy(smcnn_file, models_dir), {}, {}))
    assert store.models.model_version(registered)["version"] == 1  # its own kind and name: registered
