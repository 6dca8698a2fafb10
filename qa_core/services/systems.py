"""External systems (issue 36): the one front door for runs and scoring services that rank like a model.

A system is named ``system:<name>`` wherever models are listed (``model_loading.model_names``), and
``load`` gives the pages a ``Ranker`` for it (``qa_core.rankers.external``), so Ask, Compare,
Errors, Label, ``batch-score`` and ``evaluate`` reach a system exactly as they reach a model.

The run contract (``check_run``): a TREC run or JSONL ``{qid, doc_id, score}`` for one dataset,
refused whole, with file and line, for a malformed line, a duplicate (qid, doc_id), a score that is
not a finite number (``qa_core.data.importers.read_run_located``), a run that does not fit the
dataset (fewer than half of its (qid, doc_id) pairs are the dataset's) and any question or candidate
id the dataset lacks. A run that covers only some questions is accepted and says which it lacks;
``run_coverage`` gives its metrics over the questions it covers and over the whole split
(an uncovered question counts 0, as ``trec_eval -c``), both named. Scores decide the order with the
project's one tie rule (``qa_core.ordering``, through ``Ranker.rank``).

The service contract is ``qa_core.rankers.service_client`` (and the README's "Scoring services").
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qa_core.names import check_name
from qa_core.types import Dataset, InputError, Question

if TYPE_CHECKING:  # the rest is imported where used: every command of the CLI imports this module
    from db.store import Store
    from qa_core.access import Actor
    from qa_core.rankers.base import Ranker

PREFIX = "system:"
RUN, SERVICE = "run", "service"
FIT_SHARE = 0.5  # a run must have at least this share of its (qid, doc_id) pairs in the dataset
LISTED_MISSING = 10  # questions named in a coverage note
SHOWN_FILE_CHARS = 60


def is_system(name: str) -> bool:
    return name.startswith(PREFIX)


def listed_name(system: str) -> str:
    return f"{PREFIX}{system}"


def system_name(name: str) -> str:
    """The store's name of ``system:<name>`` (a plain name passes unchanged, surrounding blanks
    dropped as the store drops them): what every write and look-up uses, so a system added as
    ``system:foo`` is found, renamed and removed by that name and by ``foo``."""
    name = name.strip()
    return name[len(PREFIX):].strip() if is_system(name) else name


def _new_name(name: str) -> str:
    """``system_name`` of a name being given, checked by the one name rule (``qa_core.names``)
    before any work is done; ``InputError`` when nothing is left after the prefix."""
    stored = system_name(name)
    if not stored and name.strip():
        raise InputError(f"a system needs a name after {PREFIX!r} (the prefix alone names nothing)")
    return check_name(stored, "system name")


def names(store: Store, dataset: str | None) -> list[str]:
    """What the model lists add: ``system:<name>`` of the dataset's runs and of every service."""
    return [listed_name(row["name"]) for row in store.systems.systems(dataset)]


# ---------------------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunCheck:
    """A run that fits its dataset: its scores, and the questions of each split it does not cover."""

    scores: dict[str, dict[str, float]]
    covered: int
    missing: dict[str, list[str]]  # split -> qids without a ranking

    def note(self) -> str:
        """One line: what the run covers, and which questions it lacks (some named); a question with
        no candidate is not one it lacks (nothing is there to rank), and the line says so."""
        lacking = [qid for qids in self.missing.values() for qid in qids]
        if not lacking:
            return f"ranks all {self.covered} questions with candidates of the splits it covers"
        by_split = ", ".join(f"{len(qids)} of {split}" for split, qids in self.missing.items())
        named = ", ".join(lacking[:LISTED_MISSING]) + (" …" if len(lacking) > LISTED_MISSING else "")
        return f"ranks {self.covered} questions; lacks {by_split} ({named}), counting questions with candidates"


def check_run(path: Path, questions: Sequence[Question], dataset: str, fmt: str | None = None) -> RunCheck:
    """The run at ``path`` checked against ``dataset``'s ``questions``; ``InputError`` with file and line
    (see the module docstring for the rules)."""
    from qa_core.data.importers import read_run_located

    run, lines = read_run_located(path, fmt)
    if not run:
        raise InputError("the run has no rows", path=str(path))
    known = {q.qid: {c.doc_id for c in q.candidates} for q in questions}
    unknown = [(qid, doc) for (qid, doc) in lines if doc not in known.get(qid, ())]
    if len(unknown) > (1 - FIT_SHARE) * len(lines):
        qid, doc = unknown[0]
        raise InputError(
            f"this run does not fit dataset {dataset!r}: {len(unknown):,} of its {len(lines):,} (question, candidate) "
            f"pairs are not the dataset's (the first: question {qid}, candidate {doc}); is it a run of another dataset?",
            path=str(path), line=lines[qid, doc],
        )
    if unknown:
        qid, doc = unknown[0]
        what = f"candidate {doc} is not one of question {qid}'s" if qid in known else f"question {qid} is not in it"
        raise InputError(f"{what} in dataset {dataset!r} ({len(unknown):,} such lines; the run was not added)",
                         path=str(path), line=lines[qid, doc])
    ranked_splits = {q.split for q in questions if q.qid in run}  # a run of TEST lacks nothing of TRAIN
    missing: dict[str, list[str]] = {}
    for question in questions:
        if question.qid not in run and question.split in ranked_splits and question.candidates:
            missing.setdefault(question.split, []).append(question.qid)
    return RunCheck(run, len(run), missing)


def add_run(store: Store, path: Path, dataset: str, name: str, *, actor: Actor | None = None,
            fmt: str | None = None, file_name: str | None = None) -> dict[str, Any]:
    """Check the run at ``path`` against ``dataset`` and keep it as system ``name``; returns the
    system with its coverage ``note``. Nothing is kept when the run is refused."""
    name = _new_name(name)
    path = Path(path)
    check = check_run(path, store.datasets.load_dataset(dataset).questions, dataset, fmt)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    pairs = sum(len(docs) for docs in check.scores.values())
    added = store.systems.add_system(name, RUN, dataset=dataset, file_name=file_name or path.name, file_sha256=digest,
                             info={"questions": check.covered, "pairs": pairs}, scores=check.scores, actor=actor)
    return {**_public(added), "note": check.note()}


def add_run_upload(store: Store, content: bytes, file_name: str, dataset: str, name: str, *,
                   actor: Actor | None = None) -> dict[str, Any]:
    """``add_run`` for a file uploaded on a page: its errors name the uploaded file, not the
    temporary copy read. The uploaded name is provenance and says the format (``.jsonl``), never a
    path: the copy has a name of its own (an uploaded ``..`` or a 300-byte name is no file name)."""
    fmt = "jsonl" if file_name.lower().endswith(".jsonl") else None
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "uploaded-run"
        path.write_bytes(content)
        try:
            return add_run(store, path, dataset, name, actor=actor, fmt=fmt, file_name=file_name)
        except InputError as error:
            if error.path != str(path):
                raise
            where = len(str(InputError("", path=error.path, line=error.line)))
            raise InputError(str(error)[where:], path=shown_file_name(file_name), line=error.line) from None


def shown_file_name(file_name: str) -> str:
    """An uploaded file's name as a sentence names it: on one line, cut at ``SHOWN_FILE_CHARS`` with
    an ellipsis (a browser sends any name, a 300-byte or a multi-line one)."""
    name = " ".join(file_name.split())
    return name if len(name) <= SHOWN_FILE_CHARS else name[:SHOWN_FILE_CHARS - 1] + "…"


# ------------------------------------------------------------------------------------ services


def add_service(store: Store, url: str, name: str, *, actor: Actor | None = None) -> dict[str, Any]:
    """Ask the service at ``url`` what it is (``GET /info``, optional) and keep it as system ``name``.
    A service that is down, slow or answers outside the contract is refused with its one sentence."""
    from qa_core.rankers.service_client import ServiceClient, check_url

    name = _new_name(name)
    url = check_url(url)
    info = ServiceClient(url).info()
    described = None if info is None else {"name": info.name, "version": info.version, "max_batch": info.max_batch}
    return _public(store.systems.add_system(name, SERVICE, url=url, info=described, actor=actor))


def _public(system: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in system.items() if key != "scores"}


# ----------------------------------------------------------------------------- as a ranker


def load(store: Store, name: str, dataset: str | None) -> Ranker:
    """The ranker of system ``name`` (``system:<name>`` or plain): a run's for its own dataset only."""
    from qa_core.rankers.external import RunRanker, ServiceRanker
    from qa_core.rankers.service_client import ServiceClient, ServiceInfo

    system = store.systems.system(system_name(name))
    shown = listed_name(system["name"])
    if system["kind"] == SERVICE:
        info = ServiceInfo(**system["info"]) if system["info"] else ServiceInfo()
        cache_id = f"{system['name']}@{info.version}" if info.version else system["url"]
        return ServiceRanker(shown, ServiceClient(system["url"], cache_id=cache_id, max_batch=info.max_batch))
    if dataset is not None and dataset != system["dataset"]:
        raise InputError(f"{shown} is a run of dataset {system['dataset']!r}, not of {dataset!r}")
    questions = store.datasets.load_dataset(system["dataset"]).questions
    return RunRanker(shown, system["dataset"], system["scores"], {q.qid: q.text for q in questions})


def version_key(store: Store, name: str) -> str:
    """What changes when the system behind ``name`` is replaced (a cache key for the pages)."""
    system = store.systems.system(system_name(name), scores=False)
    return f"{system['id']}:{system['file_sha256'] or system['url']}:{(system['info'] or {}).get('version')}"


def describe(store: Store, name: str) -> str:
    """One line for a page: what the system is and where it came from (a URL as ``shown_url`` shows
    it: a service added before ``check_url`` refused credentials may still hold them; a version as
    ``shown_version`` shows it: a path by its file name, a long one cut with an ellipsis)."""
    from qa_core.rankers.service_client import shown_url, shown_version

    system = store.systems.system(system_name(name), scores=False)
    added = f"added by {system['added_by']} on {system['added_at']:%Y-%m-%d %H:%M} UTC"
    if system["kind"] == RUN:
        questions = (system["info"] or {}).get("questions", "its")
        return (f"{listed_name(system['name'])}: a stored run of {system['dataset']} ranking {questions} questions "
                "(a candidate it lacks ranks last, a question it lacks in the tie rule's order) · file "
                f"{system['file_name']} (sha256 {system['file_sha256'][:12]}…) · {added}")
    info = system["info"] or {}
    named = " ".join(part for part in (info.get("name"), shown_version(info.get("version"))) if part)
    about = f" ({named or 'its /info names nothing'})" if info else " (no /info)"
    return f"{listed_name(system['name'])}: a scoring service at {shown_url(system['url'])}{about} · {added}"


@dataclass(frozen=True)
class RunCoverage:
    """A run's scores, read once, over its ``dataset``: the splits a page offers and the chosen
    split's metrics come from this one read (a page reruns on every click)."""

    name: str  # as listed: ``system:<name>``
    scores: dict[str, dict[str, float]]
    dataset: Dataset

    def splits(self) -> list[str]:
        """The dataset's splits, those the run ranks questions of first (a page starts on one it
        covers, not on a split it says nothing about)."""
        covered = {question.split for question in self.dataset.questions if question.qid in self.scores}
        return sorted(self.dataset.splits, key=lambda split: split not in covered)

    def metrics(self, split: str) -> dict[str, Any]:
        """The run's metrics on ``split`` (gold labels) over the judged questions it covers and over
        all of them (an uncovered question counts 0), with both question counts. Judged: a
        question with a gold label on a candidate, the only ones a metric is computed over."""
        from qa_core.evaluation import evaluate, qrels_from_questions

        qrels = qrels_from_questions(self.dataset.split(split))
        judged = list(qrels)
        covered = [qid for qid in judged if qid in self.scores]
        if not covered:
            raise InputError(f"{self.name} ranks none of these {len(judged)} judged questions")
        return {
            f"over the {len(covered)} judged questions it covers":
                evaluate(self.scores, {qid: qrels[qid] for qid in covered}).aggregate,
            f"over all {len(judged)} judged questions (uncovered count 0)": evaluate(self.scores, qrels).aggregate,
        }


def run_coverage(store: Store, name: str, dataset: Dataset) -> RunCoverage:
    """Run ``name``'s scores over ``dataset`` (a service: ``InputError``, it scores every question)."""
    system = store.systems.system(system_name(name))
    if system["kind"] != RUN:
        raise InputError(f"{listed_name(system['name'])} is a service: it scores every question")
    return RunCoverage(listed_name(system["name"]), system["scores"], dataset)


# ------------------------------------------------------------------------------- listing


def overview(store: Store, dataset: str | None = None) -> list[dict[str, Any]]:
    """Every system (of ``dataset``, and every service) as a row for a table or the CLI, each value
    as ``describe`` shows it (a URL without secrets, a version by ``shown_version``, the time to the
    minute in UTC), and "" where a kind of system has none (a run's version, a service's SHA-256)."""
    from qa_core.rankers.service_client import shown_url, shown_version

    return [
        {"system": listed_name(row["name"]), "kind": row["kind"], "dataset": row["dataset"] or "any",
         "source": shown_url(row["url"]) if row["url"] else row["file_name"],
         "version": shown_version((row["info"] or {}).get("version")) or "", "added by": row["added_by"],
         "added": f"{row['added_at']:%Y-%m-%d %H:%M} UTC", "sha256": row["file_sha256"] or ""}
        for row in store.systems.systems(dataset)
    ]


def rename(store: Store, name: str, new_name: str, *, actor: Actor | None = None) -> None:
    store.systems.rename_system(system_name(name), _new_name(new_name), actor=actor)


def remove(store: Store, name: str, *, actor: Actor | None = None) -> None:
    store.systems.remove_system(system_name(name), actor=actor)
