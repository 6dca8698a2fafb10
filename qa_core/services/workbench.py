"""Service layer behind the Streamlit pages and the CLI: store, demo data, models, candidates, ranking.

No Streamlit here, so every behaviour the pages show is testable (and used) without a browser; the
pages only add widgets and caching around these calls.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import re
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from qa_core import config
from qa_core.rankers import registry
from qa_core.rankers.base import Ranker
from qa_core.services import systems
from qa_core.text.normalise import visible_text
from qa_core.types import (
    MAX_CANDIDATE_CHARS,
    MAX_QUESTION_CHARS,
    Candidate,
    Dataset,
    InputError,
    NotTrainedError,
    Question,
)

if TYPE_CHECKING:  # imported where used: the CLI starts without loading the store or bm25s
    from db.store import Store
    from qa_core.retrieval import BM25Index

DEFAULT_CANDIDATES = 50


# ---------------------------------------------------------------------- store and demo data


def open_store(url: str | None = None, *, team: bool = False) -> Store:
    """The store at ``url``, else the configured one (``RERANK_LAB_DB`` or SQLite in the data folder);
    ``team``: writes need a signed-in user (``db/audit.py``)."""
    from db.store import Store

    return Store(url or config.database_url(), team=team)


def ensure_demo(store: Store, *, beside_others: bool = False) -> bool:
    """Import the bundled demo corpus into an empty store, so a first run works offline; with
    ``beside_others`` (``data demo``, which ``make run`` calls) also into a store that holds other
    datasets but not the demo.

    Returns whether it imported. Two first runs racing each other are fine: the loser sees the
    winner's dataset. The app itself imports it (``SYSTEM`` in the audit trail), in team mode too.
    """
    from qa_core.access import SYSTEM
    from qa_core.data.demo import DEMO_NAME, load_demo

    names = store.dataset_names()
    if DEMO_NAME in names or (names and not beside_others):
        return False
    try:
        store.import_dataset(load_demo(), actor=SYSTEM)
    except InputError:
        if DEMO_NAME not in store.dataset_names():
            raise
        return False
    return True


def masked_url(url: str) -> str:
    """The database URL with any password hidden, safe to show on a page."""
    try:
        return config.parse_database_url(url).render_as_string(hide_password=True)
    except Exception:  # not parseable: show nothing that could be a secret
        return "(unparseable database URL)"


def device_label() -> str:
    """Where neural rankers run (``RERANK_LAB_DEVICE``, else CUDA when torch sees it, else the CPU):
    ``GPU (<name>, <memory> GiB)`` or ``CPU``, with `` · mixed precision`` when ``RERANK_LAB_AMP`` is on."""
    from qa_core.device import amp_enabled, default_device, describe

    try:
        label = describe(default_device())
    except InputError as error:
        return str(error)
    return f"{label} · mixed precision" if amp_enabled() else label


def datasets_overview(store: Store) -> pd.DataFrame:
    """One row per dataset: questions per split, candidates, gold positives, labelled candidates."""
    rows = []
    for name in store.dataset_names():
        summary = store.dataset_summary(name)
        rows.append(
            {
                "dataset": name,
                "source": summary["source"],
                "questions": sum(summary["questions"].values()),
                "splits": ", ".join(f"{split}: {count}" for split, count in summary["questions"].items()),
                "candidates": summary["candidates"],
                "gold positives": summary["positives"],
                "labelled": summary["labelled"],
            }
        )
    return pd.DataFrame(rows, columns=["dataset", "source", "questions", "splits", "candidates", "gold positives", "labelled"])


def models_overview(store: Store) -> pd.DataFrame:
    """Registered model versions with their training data, where they are in use, headline metrics."""
    rows = [
        {
            "model": version["name"],
            "version": version["version"],
            "trained on": (version["training_data"] or {}).get("dataset", ""),
            "in use for": ", ".join(version["promoted_for"]),
            "dev MAP": (version["metrics"] or {}).get("dev_map"),
            "created": version["created_at"],
        }
        for version in store.model_versions()
    ]
    return pd.DataFrame(rows, columns=["model", "version", "trained on", "in use for", "dev MAP", "created"])


# ---------------------------------------------------------------------- models


def model_names(store: Store | None = None, dataset: str | None = None) -> list[str]:
    """Registered models; with a store and a dataset, those ready to score it first (baselines,
    models trained on or promoted for it), so that a page's default choice works on a fresh store."""
    names = registry.available()
    if store is None or dataset is None:
        return names + (systems.names(store, None) if store is not None else [])  # every system of the store

    def ready(name: str) -> bool:
        return not registry.ranker_class(name).capabilities.trainable or store.promoted_model(name, dataset) is not None

    return sorted(names, key=lambda name: (not ready(name), name)) + systems.names(store, dataset)  # then the systems


def _naive_utc(when: datetime) -> datetime:
    """A stored time comparable with any other (the store keeps UTC; a driver may add the zone)."""
    return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo is not None else when


def usage(store: Store) -> list[tuple[datetime, str, str]]:
    """``(when, dataset, model)`` of what was done with a model on a dataset, newest first: versions
    registered (the dataset trained on), promotions (the dataset promoted for) and the newest
    training jobs. What "last used" means on every page (docs/architecture.md, "What a page shows")."""
    events = []
    for version in store.model_versions():
        trained_on = (version["training_data"] or {}).get("dataset")
        if trained_on:
            events.append((_naive_utc(version["created_at"]), trained_on, version["name"]))
        for scope in version["promoted_for"]:
            history = store.promotion_history(version["name"], scope)
            if history and history[0].get("promoted_at") is not None:
                events.append((_naive_utc(history[0]["promoted_at"]), scope, version["name"]))
    events += [(_naive_utc(job["created_at"]), job["dataset"], job["model"]) for job in store.jobs(limit=5)]
    return sorted(events, key=lambda event: event[0], reverse=True)


def last_used_dataset(store: Store, datasets: Sequence[str]) -> str | None:
    """The one of ``datasets`` a model was last trained on, promoted for or queued for (else None)."""
    return next((dataset for _, dataset, _ in usage(store) if dataset in datasets), None)


def default_model(store: Store, names: Sequence[str], dataset: str | None = None) -> str | None:
    """The one of ``names`` last used (trained, promoted, queued; on ``dataset`` when given): what
    the user last put to work; else the first of ``names``."""
    used = (model for _, on, model in usage(store) if model in names and dataset in (None, on))
    return next(used, names[0] if names else None)


def default_models(store: Store, names: Sequence[str], dataset: str, count: int) -> list[str]:
    """``count`` of ``names`` to compare first: the trained models ``dataset`` has a version of, last
    used first, then the baselines (Compare starts on trained models when they exist)."""
    trained = [name for name in names if not systems.is_system(name) and registry.ranker_class(name).capabilities.trainable
               and store.promoted_model(name, dataset) is not None]
    used = [model for _, on, model in usage(store) if on == dataset and model in trained]
    ordered = list(dict.fromkeys([*used, *trained, *names]))
    return ordered[:count]


def train_command(name: str, dataset: str | None = None) -> str:
    return f"python -m qa_core train --model {name} --data {dataset or 'DATASET'}"


def model_version_key(store: Store, name: str, dataset: str) -> str | None:
    """The version a trainable model would load for ``dataset`` now (None otherwise): a cache key
    that changes when a new version is trained or promoted for it."""
    if systems.is_system(name):
        return systems.version_key(store, name)
    if looks_like_path(name) or not registry.ranker_class(name).capabilities.trainable:
        return None
    record = store.promoted_model(name, dataset)
    return None if record is None else f"{record['id']}:{record['checkpoint_path']}"


def version_in_use(store: Store, name: str, dataset: str) -> str:
    """One line for a page: which version of ``name`` scores ``dataset`` and what it was trained on."""
    if looks_like_path(name):
        return f"checkpoint {name}"
    if systems.is_system(name):
        return systems.describe(store, name)
    capabilities = registry.ranker_class(name).capabilities
    if not capabilities.trainable:
        fitted = (f"; IDF from {dataset}'s training split" if capabilities.learns_statistics
                  else "; statistics (IDF) from the pool it reranks" if capabilities.pool_dependent else "")
        return f"{name}: nothing to train{fitted}"
    record = store.promoted_model(name, dataset)
    if record is None:
        return f"{name}: no version trained on or promoted for {dataset}"
    data = record["training_data"] or {}
    trained = data.get("dataset") or "its own data"
    seed = f", seed {data['seed']}" if data.get("seed") is not None else ""
    why = f"promoted for {dataset}" if record["promoted"] else f"the newest trained on {dataset} (none promoted)"
    return f"{name} version {record['version']} · trained on {trained}{seed} · {why}"


def load_ranker(store: Store, name: str, dataset: str | None = None) -> Ranker:
    """A ready-to-score ranker for ``dataset``, by registered name or checkpoint path.

    Trainable models load the version ``dataset`` uses (``Store.promoted_model``: promoted for it,
    else the newest trained on it) and raise ``NotTrainedError`` with the train command when there
    is none: a model trained on another dataset is used only where it was promoted. When that
    version's checkpoint is missing or refused, the previous loadable one is used and a
    ``qa_core.services.jobs.CheckpointFallbackWarning`` says which (``load_promoted`` returns the
    same as data, for a page to show). Baselines are created and, when they learn statistics
    (``capabilities.learns_statistics``), fitted on ``dataset``'s train split.
    """
    if looks_like_path(name):
        return registry.load(Path(name))
    if systems.is_system(name):
        return systems.load(store, name, dataset)
    ranker_class = registry.ranker_class(name)
    if ranker_class.capabilities.trainable:
        from qa_core.services.jobs import CheckpointFallbackWarning, load_promoted

        if dataset is None:
            raise InputError(f"model {name!r} is trained per dataset: say which dataset it is to score")
        if store.promoted_model(name, dataset) is None:
            raise NotTrainedError(
                f"model {name!r} has no version trained on or promoted for {dataset!r}; train it with: "
                f"{train_command(name, dataset)} (or promote a version trained elsewhere on the Train page)"
            )
        loaded = load_promoted(store, name, dataset)
        if loaded.notice is not None:
            warnings.warn(loaded.notice, CheckpointFallbackWarning, stacklevel=2)
        return loaded.ranker
    ranker = ranker_class()
    if dataset is not None and ranker_class.capabilities.learns_statistics:
        questions = store.load_dataset(dataset)
        # Baselines learn label-free statistics (IDF); a dataset without a train split still has text.
        ranker.fit(questions.split("train") or questions.questions, questions.split("dev"), progress=False)
    return ranker


def looks_like_path(name: str) -> bool:
    return name.endswith(".pt") or "/" in name or "\\" in name


# ---------------------------------------------------------------------- questions and candidates


def _checked_text(text: str | None, what: str, limit: int, hint: str) -> str:
    """``text`` stripped of surrounding whitespace; ``InputError`` naming ``what`` if it is empty
    (with ``hint`` on what to do) or longer than ``limit`` characters."""
    value = visible_text(text or "").strip()
    if not value:
        raise InputError(f"{what} is empty: {hint}")
    if len(value) > limit:
        raise InputError(f"{what} is too long ({len(value):,} characters); the limit is {limit:,}")
    return value


def check_question(text: str | None) -> str:
    """The question stripped of surrounding whitespace; ``InputError`` if empty or too long."""
    return _checked_text(text, "the question", MAX_QUESTION_CHARS, "type a question or pick one from the dataset")


def check_candidate(text: str | None) -> str:
    """An edited candidate stripped of surrounding whitespace; ``InputError`` if empty or too long."""
    return _checked_text(text, "the edited candidate", MAX_CANDIDATE_CHARS, "type the answer text to score")


def sentence_key(text: str) -> str:
    """What makes two candidate sentences the same sentence of a collection (case and spacing aside)."""
    return " ".join(text.split()).lower()


def unique_sentences(rows: Iterable[tuple[str, str, str]]) -> Iterator[tuple[str, str]]:
    """``(qid/doc_id, text)`` of each sentence's first occurrence among ``(qid, doc_id, text)`` rows,
    in their order: the collection a typed question searches, named as its sentences are named."""
    seen: set[str] = set()
    for qid, doc_id, text in rows:
        key = sentence_key(text)
        if key and key not in seen:
            seen.add(key)
            yield collection_id(qid, doc_id), text


def collection_id(qid: str, doc_id: str) -> str:
    """A collection sentence's id: doc_ids repeat across questions in many benchmarks; qid/doc_id does not."""
    return f"{qid}/{doc_id}"


def collection_sentences(dataset: Dataset) -> dict[str, Candidate]:
    """The dataset's unique candidate sentences (first occurrence kept), keyed ``qid/doc_id``, from
    a dataset in memory (the Ask page reads them from the store, ``candidates_for_question``)."""
    pairs = [(question.qid, candidate) for question in dataset.questions for candidate in question.candidates]
    originals = {collection_id(qid, candidate.doc_id): candidate for qid, candidate in reversed(pairs)}
    return {
        name: Candidate(name, text, source=originals[name].source, url=originals[name].url)
        for name, text in unique_sentences((qid, candidate.doc_id, candidate.text) for qid, candidate in pairs)
    }


def index_folder(store: Store, dataset: str) -> Path:
    """Where the dataset's BM25 index is saved: the data folder, per store and dataset (replicas
    sharing the data folder share it)."""
    place = hashlib.sha256(f"{store.engine.url}\0{dataset}".encode()).hexdigest()[:24]
    return config.data_dir() / "bm25" / place


_indexes: dict[tuple[str, str, str], BM25Index] = {}
_indexes_lock = threading.Lock()


def dataset_version(store: Store, dataset: str) -> str:
    """Changes when the dataset is re-imported: a cache key for what is built from its text.

    Called on every request (Ask page, ``candidates_for_question``), so it is one indexed lookup."""
    row_id, created_at = store.dataset_stamp(dataset)
    return f"{row_id}@{created_at}"


def collection_index(store: Store, dataset: str) -> BM25Index:
    """The BM25 index of the dataset's unique candidate sentences, once per store, dataset and import
    (a re-import rebuilds it): loaded from the data folder, or built from one streamed pass over the
    store's candidate texts (the unique-sentence map made in that pass) and saved. The sentences
    themselves stay in the store; a search's hits are read by id."""
    from qa_core.retrieval import saved_index

    version = dataset_version(store, dataset)
    key = (str(store.engine.url), dataset, version)
    with _indexes_lock:
        if key not in _indexes:
            _indexes[key] = saved_index(
                index_folder(store, dataset), version, lambda: list(unique_sentences(store.candidate_texts(dataset)))
            )
        return _indexes[key]


def _split_ids(name: str) -> list[tuple[str, str]]:
    """Every ``(qid, doc_id)`` a collection id could name: either part may hold '/' itself."""
    return [(name[:at], name[at + 1:]) for at, char in enumerate(name) if char == "/"]


def candidates_for_question(
    store: Store, dataset: str, question_text: str, k: int = DEFAULT_CANDIDATES
) -> list[Candidate]:
    """BM25's top ``k`` of the dataset's unique candidate sentences, with first-stage rank and score.

    ``InputError`` when no sentence shares a word with the question (there is nothing to rerank).
    """
    question = check_question(question_text)
    if k < 1:
        raise InputError(f"the number of candidates must be at least 1, got {k}")
    hits = collection_index(store, dataset).search(question, k)
    if not hits:
        raise InputError(
            f"no sentence of dataset {dataset!r} shares a word with the question (question words such as "
            "'who' or 'is' are not searched); try other words or pick one of the dataset's questions"
        )
    stored = store.candidates_by_id(dataset, {ids for name, _ in hits for ids in _split_ids(name)})
    found = {collection_id(qid, doc_id): candidate for (qid, doc_id), candidate in stored.items()}
    if any(name not in found for name, _ in hits):
        raise InputError(f"dataset {dataset!r} was imported again while the question was searched; ask it again")
    return [
        dataclasses.replace(found[name], doc_id=name, first_stage_rank=position, first_stage_score=score)
        for position, (name, score) in enumerate(hits, start=1)
    ]


def candidates_origin(store: Store, dataset: str, qid: str | None) -> str:
    """How a ranked pool was found, for a caption: a dataset question's own candidates (``qid``), or
    BM25 over the dataset's whole collection (a typed question)."""
    if qid is not None:
        return f"question {qid}'s own candidates"
    index = collection_index(store, dataset)
    return f"BM25's best of the dataset's {len(index):,} unique sentences ({index.analysis.describe()})"


def dataset_questions(store: Store, dataset: str) -> list[Question]:
    """The dataset's questions with their own candidate pools and gold labels, in import order."""
    return store.load_dataset(dataset).questions


# ---------------------------------------------------------------------- rendering data


# What forms markdown, GFM or LaTeX syntax anywhere in a line (``&<>`` become entities, which never
# form syntax; ``(`` ``)`` ``!`` only follow an escaped ``]`` or ``[``), and what does at a line's
# start: list items (``-`` ``+`` ``1.`` ``1)``), setext underlines (``=`` ``-``).
_MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]#~|$])")
_LINE_START_SPECIALS = re.compile(r"^([-+=]|\d{1,9}(?=[.)]))", re.MULTILINE)
# Streamlit's markdown (1.67, frontend StreamlitMarkdown) also rewrites the text itself after
# parsing, where no escape reaches: emoji and ``:streamlit:`` shortcodes, ``:material/...:``
# icons, ``:name[...]`` directives (colours, badges, ``:small``), GFM's literal links (http(s)://,
# www., emails, mailto:) and typographic arrows (``->``, ``<=``, ``--`` ...). A WORD JOINER
# (U+2060: invisible, no width, no line break) breaks each pattern where it would start, so the
# text still reads exactly as written; tests/test_markdown_escaping.py holds the patterns.
WORD_JOINER = "\u2060"
# After a colon: a directive or shortcode name (an ASCII letter, ``_``, ``+``, ``-``; the digit-only
# emoji names), a link's ``//``; after ``@``: an email's domain; ``www`` before its dot; inside
# ``->``, ``<=``, ``--`` ... (a time such as 12:30 or a date gets none).
_REWRITTEN = re.compile(
    r"(?<=:)(?=[A-Za-z_+/-]|(?:100|1234):)|(?<=@)(?=[\w-])|(?<=www)(?=\.)|(?<=[<>~=-])(?=[<>~=-])",
    re.IGNORECASE,
)
_LINE_INDENT = re.compile(r"^[ \t]+", re.MULTILINE)


def as_markdown(text: str) -> str:
    """Data text for ``st.markdown``, shown exactly as written: no markdown, LaTeX or HTML from
    data (punctuation backslash-escaped, ``&<>`` as entities, a line's indentation as entities, so
    it is no code block), and nothing Streamlit rewrites in text (word joiners, see above): no
    links, emoji, icons or colours. The one escaping function for data in markdown.

    Escapes before entities, and quotes left to the backslash, so no entity gets a backslash inside."""
    escaped = _MARKDOWN_SPECIALS.sub(r"\\\1", _REWRITTEN.sub(WORD_JOINER, text))
    escaped = html.escape(_LINE_START_SPECIALS.sub(_escape_line_start, escaped), quote=False)
    return _LINE_INDENT.sub(lambda indent: "".join(f"&#{ord(c)};" for c in indent.group()), escaped)


def _escape_line_start(match: re.Match[str]) -> str:
    """``-`` -> ``\\-``; ``12`` (before ``.`` or ``)``) -> ``12\\`` (the delimiter gets the backslash)."""
    marker = match.group()
    return f"{marker}\\" if marker[0].isdigit() else f"\\{marker}"


# ---------------------------------------------------------------------- labels


def stored_labels(store: Store, dataset: str, qid: str | None = None) -> dict[str, int]:
    """The latest stored (annotator) label per candidate, ``{doc_id: grade}``.

    With ``qid``, the labels of that question's pool; without, of every question, keyed
    ``qid/doc_id`` as the BM25 collection names its sentences (``candidates_for_question``).
    """
    qrels = store.qrels(dataset, source="labels")
    if qid is not None:
        return dict(qrels.get(qid, {}))
    return {f"{q}/{doc_id}": grade for q, grades in qrels.items() for doc_id, grade in grades.items()}


# ---------------------------------------------------------------------- links between pages


ASK_PARAMS = ("dataset", "qid", "model")


def ask_url(dataset: str, qid: str, model: str) -> str:
    """The Ask page's address for one dataset question and model (query values URL-encoded)."""
    from urllib.parse import urlencode

    return "/Ask?" + urlencode({"dataset": dataset, "qid": qid, "model": model})


@dataclass(frozen=True)
class AskRequest:
    """What the Ask page's query parameters ask for, checked; ``problems`` lists what was ignored."""

    dataset: str | None = None
    question_index: int | None = None
    model: str | None = None
    problems: tuple[str, ...] = ()


def ask_request(
    params: Mapping[str, str], datasets: Sequence[str], models: Sequence[str], questions: Sequence[Question] = ()
) -> AskRequest:
    """Check ``?dataset=...&qid=...&model=...`` against what exists; ``questions`` are the named
    dataset's (looked up by qid). Unknown values are reported, never raised."""
    problems: list[str] = []
    dataset = params.get("dataset")
    if dataset is not None and dataset not in datasets:
        problems.append(f"unknown dataset {dataset!r}")
        dataset = None
    model = params.get("model")
    if model is not None and model not in models:
        problems.append(f"unknown model {model!r}")
        model = None
    index = None
    qid = params.get("qid")
    if qid is not None:
        if dataset is None:
            problems.append(f"question {qid!r} needs a known dataset")
        else:
            index = next((i for i, question in enumerate(questions) if question.qid == qid), None)
            if index is None:
                problems.append(f"dataset {dataset!r} has no question {qid!r}")
    return AskRequest(dataset, index, model, tuple(problems))
