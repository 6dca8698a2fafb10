"""What the Train page shows, without Streamlit: label sources, jobs, versions, curves.

The page starts a job with ``qa_core.services.jobs.start_training_job`` (training runs in its own
process), polls ``job_status`` for the progress bar and the live loss / dev-MAP curve, and lists
the registry's versions beside the promoted one with ``versions_table`` and ``comparison``.
Promote and roll back are ``VersionStore.promote`` / ``VersionStore.rollback`` for one dataset; Ask, Compare,
Errors and Label load the version promoted for their dataset, so a promotion is what changes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from qa_core.checkpoints import Registration
from qa_core.evaluation import qrels_from_questions
from qa_core.rankers import registry
from qa_core.services import viz
from qa_core.services.experiments import score_questions
from qa_core.services.jobs import progress_fraction
from qa_core.services.labeling.training_labels import ResolvedLabel, TrainingLabels, training_labels
from qa_core.significance import ALPHA, format_p, per_query, randomisation_test
from qa_core.types import InputError

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from db.store import Store

# The rule of ``qa_core.services.labeling.training_labels``, as the page states it.
LABEL_RULE = (
    "For every pair, the first that applies: **1.** its latest adjudication; **2.** else the majority of its "
    "current labels (one per annotator; a tie goes to the tied grade judged most recently; pairs whose "
    "annotators disagree are listed below as conflicts); **3.** else its gold label, if gold labels are "
    "included for its split; **4.** else no label: the pair is left out of training and evaluation."
)
GOLD_CHOICES: dict[str, bool | list[str]] = {
    "every split": True,
    "dev only (select on gold, train on stored labels)": ["dev"],
    "none": False,
}
# What a version's stored numbers are: the landing page's models table says it too.
VERSIONS_NOTE = (
    "dev MAP (kept best, training labels): the weights training kept (its best evaluation), on every DEV question "
    "of the dataset it was trained on, with the labels that job trained with (the labels column; clean off), so "
    "not the gold-label number of evaluate, Compare and Errors unless it trained on gold; test MAP (gold): every "
    "TEST question of that dataset with gold labels (clean off)."
)
VERSION_METRICS_NOTE = (
    f"{VERSIONS_NOTE} dev MRR: as dev MAP. The card below a chosen version compares it with the promoted one on DEV "
    "with gold labels."
)
METRIC_COLUMNS = {"dev_map": viz.VERSION_DEV_MAP, "test_gold_map": viz.VERSION_TEST_MAP, "dev_mrr": "dev MRR"}


SETTING_LABELS = {"max_epochs": "Epochs (at most; early stopping on dev MAP may end sooner)"}


def training_settings(model: str) -> dict[str, Any]:
    """The settings a training job of ``model`` may change, with the model's defaults (the Train
    page's inputs; e.g. ``{"max_epochs": 25}``, nothing for the tree kernel)."""
    cls = registry.ranker_class(model)
    defaults = cls.config_class()
    return {name: getattr(defaults, name) for name in cls.capabilities.training_settings}


def label_preview(store: Store, dataset: str, store_labels: bool, gold: bool | list[str]) -> TrainingLabels:
    """The labels a job with these choices would train on, with the conflicts: the rule above
    with stored labels, else the dataset's gold labels alone (as the job does)."""
    if store_labels:
        return training_labels(store, dataset, gold=gold)
    records = store.datasets.candidate_rows(dataset)
    return TrainingLabels(
        {r.candidate_id: ResolvedLabel(r.gold_label, "gold") for r in records if r.gold_label is not None},
        candidates=records,
    )


def sources_table(store: Store, dataset: str, resolved: TrainingLabels) -> pd.DataFrame:
    """Pairs per split and rule step (adjudicated, labels, gold): what each step contributes."""
    counts: dict[tuple[str, str], int] = {}
    for split in store.datasets.dataset_summary(dataset)["questions"]:
        for record in store.datasets.candidate_rows(dataset, split=split):
            label = resolved.labels.get(record.candidate_id)
            if label is not None:
                counts[(split, label.source)] = counts.get((split, label.source), 0) + 1
    rows = [{"split": split, "source": source, "pairs": n} for (split, source), n in sorted(counts.items())]
    return pd.DataFrame(rows, columns=["split", "source", "pairs"])


def conflicts_table(resolved: TrainingLabels) -> pd.DataFrame:
    """The pairs whose annotators disagree (no adjudication yet) and the grade the rule takes."""
    rows = [
        {
            "qid": conflict.qid,
            "question": conflict.question,
            "candidate": conflict.candidate,
            "labels": ", ".join(f"{name}: {value}" for name, value in sorted(conflict.labels.items())),
            "used": resolved.labels[conflict.candidate_id].value if conflict.candidate_id in resolved.labels else None,
            "gold": conflict.gold_label,
        }
        for conflict in resolved.conflicts
    ]
    return pd.DataFrame(rows, columns=["qid", "question", "candidate", "labels", "used", "gold"])


@dataclass
class JobStatus:
    """One job as the page shows it: the record, its progress events and the bar's fraction."""

    job: dict[str, Any]
    events: pd.DataFrame
    fraction: float
    kept: dict[str, Any] | None = None  # the version the job registered (its metrics: the kept best)

    @property
    def active(self) -> bool:
        return self.job["status"] in ("queued", "running")

    @property
    def label(self) -> str:
        job = self.job
        phase = f" ({job['phase']})" if job["phase"] and self.active else ""
        where = ""
        if not self.events.empty:
            last = self.events.iloc[-1]
            of = "" if pd.isna(last["total"]) else f" of {int(last['total'])}"
            dev = "" if pd.isna(last["dev_map"]) else f", last evaluation dev MAP {last['dev_map']:.4f}"
            where = f", {last['unit']} {int(last['step'])}{of}{dev}"
        kept = ""
        if self.kept is not None and (self.kept["metrics"] or {}).get("dev_map") is not None:
            # Early stopping keeps the best evaluation's weights: that is the version's dev MAP.
            kept = (f"; kept the best: version {self.kept['version']}, dev MAP {self.kept['metrics']['dev_map']:.4f} "
                    "(the versions table's number)")
        return f"job {job['id']}: {job['status']}{phase}{where}{kept}"

    @property
    def failed(self) -> bool:
        return self.job["status"] == "failed"

    def failure(self, in_use: dict[str, Any] | None) -> str:
        """A failed job in one sentence: how far it got, why, and the version that stays in use
        (``in_use``: ``Store.promoted_model`` for the job's model and dataset). The page shows it
        instead of a progress bar, which read as a full bar under "failed"."""
        job = self.job
        reached = "before its first step"
        if not self.events.empty:
            last = self.events.iloc[-1]
            of = "" if pd.isna(last["total"]) else f" of {int(last['total'])}"
            reached = f"at {last['unit']} {int(last['step'])}{of}"
        kept = (f"version {in_use['version']} stays in use" if in_use is not None and in_use["promoted"]
                else f"no version is in use for {job['dataset']}" if in_use is None
                else f"version {in_use['version']} (the newest trained on {job['dataset']}) stays in use")
        return (f"Training job {job['id']} failed {reached}: {str(job['error']).rstrip('.')}; nothing was registered, "
                f"and {kept}.")


EVENT_COLUMNS = ["id", "created_at", "step", "total", "unit", "batch", "loss", "dev_map"]


def job_status(store: Store, job_id: int) -> JobStatus:
    job = store.jobs.job(job_id)
    recorded = store.jobs.job_events(job_id)
    frame = pd.DataFrame(
        [
            (r.id, r.created_at, r.event.step, r.event.total, r.event.unit, r.event.batch, r.event.loss, r.event.dev_map)
            for r in recorded
        ],
        columns=EVENT_COLUMNS,
    )
    kept = store.models.model_version(job["model_version_id"]) if job["model_version_id"] is not None else None
    return JobStatus(job, frame, progress_fraction(job, [r.event for r in recorded]), kept)


def training_figure(events: pd.DataFrame) -> go.Figure:
    """Loss (left axis) and dev MAP (right axis) against mini-batches seen, or against the steps
    (e.g. the tree kernel's grid points) of a training without mini-batches."""
    import plotly.graph_objects as go

    by_batch = events["batch"].notna().all() and not events.empty
    x = events["batch"] if by_batch else events["step"]
    figure = go.Figure()
    if events["loss"].notna().any():
        figure.add_trace(go.Scatter(x=x, y=events["loss"], name="training loss", mode="lines+markers"))
    figure.add_trace(go.Scatter(x=x, y=events["dev_map"], name="dev MAP", mode="lines+markers", yaxis="y2"))
    unit = "" if events.empty else f"{events['unit'].iloc[-1]}s"
    figure.update_layout(
        xaxis_title="mini-batches" if by_batch else unit,
        yaxis={"title": "loss"},
        # Ticks of its own: an overlaying axis syncs its ticks with the loss axis by default, at such
        # values of MAP as 0.5007, 0.555, 0.6092; its grid would cross the loss axis's.
        yaxis2={"title": "dev MAP", "overlaying": "y", "side": "right", "tickmode": "auto", "showgrid": False},
        template="plotly_white",
        height=320,
        margin={"t": 30, "b": 40},
        legend={"orientation": "h"},
    )
    return figure


def training_labels_text(training_data: dict[str, Any]) -> str | None:
    """The labels a version trained with, as the versions tables show them: "gold", or the pairs of
    each source that gave any ("labels 60, gold 1180"); None where not recorded."""
    labels = training_data.get("labels")
    return ", ".join(f"{k} {v}" for k, v in labels.items() if v) if isinstance(labels, dict) else labels


def versions_table(store: Store, model: str) -> pd.DataFrame:
    """The registry's versions of ``model``, newest first, with their training data and metrics."""
    rows = []
    for version in reversed(store.models.model_versions(model)):
        data, metrics = version["training_data"] or {}, version["metrics"] or {}
        rows.append(
            {
                "version": version["version"],
                "in use for": ", ".join(version["promoted_for"]),
                "created": version["created_at"],
                "dataset": data.get("dataset", ""),
                "labels": training_labels_text(data),
                "train labels": data.get("train_labels"),
                **{title: metrics.get(key) for key, title in METRIC_COLUMNS.items()},
                "job": data.get("job"),
            }
        )
    columns = ["version", "in use for", "created", "dataset", "labels", "train labels", *METRIC_COLUMNS.values(), "job"]
    return pd.DataFrame(rows, columns=columns)


def comparison(store: Store, model: str, version: int, dataset: str) -> pd.DataFrame:
    """Metrics of ``version`` above those of the version ``dataset`` uses (its "in use for" says
    ``dataset``; one row when they are one; NaN where unknown). Each row names the dataset and the
    labels its numbers are of, its own training's: a version trained elsewhere brings another
    dataset's."""
    chosen = next(v for v in store.models.model_versions(model) if v["version"] == version)
    in_use = store.models.promoted_model(model, dataset)
    rows = [chosen] if in_use is None or in_use["version"] == version else [chosen, in_use]
    table = []
    for row in rows:
        data, metrics = row["training_data"] or {}, row["metrics"] or {}
        table.append([row["version"], dataset if in_use is not None and row["version"] == in_use["version"] else "",
                      data.get("dataset") or "not recorded", training_labels_text(data) or "not recorded",
                      *(metrics.get(key) for key in METRIC_COLUMNS)])
    return pd.DataFrame(table, columns=["version", "in use for", "trained on", "labels", *METRIC_COLUMNS.values()])


def version_to_open(versions: pd.DataFrame, in_use: dict[str, Any] | None, dataset: str, new: bool) -> int:
    """The version (of ``versions_table``, newest first) the page opens on for ``dataset``: with
    ``new`` (versions were registered since the page last looked) the newest, if trained on it (a
    training just ended here); else the one it uses (``in_use``, ``Store.promoted_model``: promoted
    for it, else the newest trained on it); else the newest of all, whose card says where it was
    trained. The newest of any dataset, opened as if it were this one's, was compared with this
    one's as "significantly worse" (issue 45)."""
    newest = versions.iloc[0]
    if new and newest["dataset"] == dataset:
        return int(newest["version"])
    return int(in_use["version"]) if in_use is not None else int(newest["version"])


DEV_SPLIT = "dev"  # versions are compared where they were selected, never on TEST


@dataclass(frozen=True)
class VersionCheck:
    """A version against the one promoted for a dataset, on that dataset's DEV questions with gold
    labels (every such question; clean off): the card the Train page shows before a promotion."""

    version: int
    promoted: int
    questions: int
    map_version: float
    map_promoted: float
    p_value: float | None  # paired randomisation test (qa_core.significance), two-sided
    worse: pd.DataFrame  # the questions whose AP dropped: qid, question, AP promoted, AP version, Δ AP
    trained_on: str | None = None  # the dataset each version was trained on (None: not recorded)
    promoted_trained_on: str | None = None

    @property
    def delta(self) -> float:
        return self.map_version - self.map_promoted

    @property
    def significantly_worse(self) -> bool:
        return self.delta < 0 and self.p_value is not None and self.p_value < ALPHA

    def summary(self, dataset: str) -> str:
        """One line naming both versions, the question set and the test."""
        shown = format_p(self.p_value)
        p_value = shown if shown.startswith("<") else f"= {shown}"
        verdict = "significantly worse" if self.significantly_worse else (
            "no significant difference" if self.p_value is None or self.p_value >= ALPHA else "significantly better")
        def elsewhere(trained_on: str | None) -> str:  # a version of another dataset is said to be one
            return "" if trained_on == dataset else f"trained on {trained_on or 'a dataset not recorded'}"

        chosen = f" ({elsewhere(self.trained_on)})" if elsewhere(self.trained_on) else ""
        promoted = ", ".join(filter(None, (f"promoted for {dataset}", elsewhere(self.promoted_trained_on))))
        return (f"Version {self.version}{chosen} against version {self.promoted} ({promoted}) on {dataset} DEV, "
                f"gold labels, all {self.questions} questions (clean off): MAP {self.map_version:.4f} vs "
                f"{self.map_promoted:.4f}, Δ {self.delta:+.4f}; paired randomisation test p {p_value}: "
                f"{verdict}; {len(self.worse)} questions got worse.")


def check_against_promoted(store: Store, model: str, version: int, dataset: str) -> VersionCheck | None:
    """``version`` of ``model`` against the version promoted for ``dataset`` on its DEV split
    (``None``: nothing promoted there, the version is the promoted one, or no DEV question has a
    relevant gold answer). Both checkpoints are scored on the same questions, each loaded as the
    store registered it: a file copied over either raises ``InputError``, as does an unknown version."""
    chosen = next((v for v in store.models.model_versions(model) if v["version"] == version), None)
    if chosen is None:
        raise InputError(f"model {model!r} has no version {version}")
    promoted = store.models.promoted_model(model, dataset)
    if promoted is None or not promoted["promoted"] or promoted["version"] == version:
        return None
    questions = [q for q in store.datasets.load_dataset(dataset, split=DEV_SPLIT).questions
                 if any(c.label is not None for c in q.candidates)]
    if not any((c.label or 0) > 0 for q in questions for c in q.candidates):
        return None
    qrels = qrels_from_questions(questions)
    runs = {name: score_questions(registry.load(Path(record["checkpoint_path"]), Registration.of(record)), questions)
            for name, record in (("promoted", promoted), ("version", chosen))}
    values = per_query(runs, qrels)
    before, after = values["promoted"]["map"], values["version"]["map"]
    texts = {q.qid: q.text for q in questions}
    delta = after - before
    dropped = delta[delta < 0].sort_values()
    worse = pd.DataFrame({"qid": dropped.index, "question": [texts[qid] for qid in dropped.index],
                          f"AP version {promoted['version']}": before[dropped.index].to_numpy(),
                          f"AP version {version}": after[dropped.index].to_numpy(), "Δ AP": dropped.to_numpy()})
    return VersionCheck(version, promoted["version"], len(questions), float(after.mean()), float(before.mean()),
                        randomisation_test(after.to_numpy(), before.to_numpy()).p_value, worse,
                        *((record["training_data"] or {}).get("dataset") for record in (chosen, promoted)))
