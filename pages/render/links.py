"""Links between pages: the Ask page's address for a dataset question and a model, and its query
parameters checked against what exists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from qa_core.types import Question

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
