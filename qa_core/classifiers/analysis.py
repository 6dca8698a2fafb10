"""Question analysis for the app and the models: coarse class, class probabilities and focus.

``QuestionAnalyzer`` uses the trained question-class CNN and focus tagger when it has them and
otherwise the documented wh-word rules of ``qa_core.structure.rel.heuristic_focus_and_class``
(who -> HUM, where -> LOC, what + city -> LOC ...), so every caller works without trained models or
the benchmark data. With only one of the two models, that one decides its part and the rules the
other. ``QuestionAnalysis.source`` says which decided what.

Token indices refer to ``Parsed.tokens`` of the question (spaCy tokens), the tokens every other
part of the app (trees, links, rankers) uses; the tagger reads the non-whitespace ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from qa_core.classifiers.focus import FocusTagger
from qa_core.classifiers.question_class import QuestionClassifier
from qa_core.data.questions import COARSE_CLASSES
from qa_core.structure.rel import heuristic_focus_and_class
from qa_core.text.nlp import Parsed, parse_many

REMEMBERED_QUESTIONS = 512  # analyses kept per analyzer: explaining k candidates re-reads one question k times


@dataclass(frozen=True)
class QuestionAnalysis:
    """What a question asks for.

    ``qclass`` is a coarse UIUC class or ``None`` (the rules found no wh-word); ``probabilities``
    maps every class to its probability when the class CNN decided, else it is empty. ``focus`` is
    the focus token's index in ``Parsed.tokens`` (``None`` when the rules find none, e.g. "why"),
    ``focus_span`` the [start, end) of the noun chunk holding it (the token alone outside a chunk).
    ``source`` is "classifiers", "heuristic" or "class CNN + heuristic focus" / "heuristic class +
    focus CNN".
    """

    qclass: str | None
    focus: int | None
    focus_span: tuple[int, int] | None
    probabilities: dict[str, float] = field(default_factory=dict)
    source: str = "heuristic"

    @property
    def class_id(self) -> int:
        """1 + the class's index in ``COARSE_CLASSES``; 0 for no class (the CNN_WO+SO embedding id)."""
        return COARSE_CLASSES.index(self.qclass) + 1 if self.qclass in COARSE_CLASSES else 0


def focus_span(parsed: Parsed, focus: int | None) -> tuple[int, int] | None:
    """The noun chunk holding token ``focus``, else that token alone."""
    if focus is None:
        return None
    for start, end in parsed.noun_chunks:
        if start <= focus < end:
            return start, end
    return focus, focus + 1


class QuestionAnalyzer:
    """Analyses parsed questions with whichever trained classifiers it is given (see module doc)."""

    def __init__(self, classifier: QuestionClassifier | None = None, tagger: FocusTagger | None = None):
        self.classifier = classifier
        self.tagger = tagger
        # Text -> analysis, least recently used first. The models never change after construction, and
        # a question's parse is a function of its text, so a text's analysis never goes stale. The app
        # shares one analyzer between sessions (threads): hence the lock.
        self._remembered: OrderedDict[str, QuestionAnalysis] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def source(self) -> str:
        if self.classifier is not None and self.tagger is not None:
            return "classifiers"
        if self.classifier is not None:
            return "class CNN + heuristic focus"
        if self.tagger is not None:
            return "heuristic class + focus CNN"
        return "heuristic"

    def __call__(self, question: Parsed) -> tuple[int | None, str | None]:
        """(focus, class): the shape ``qa_core.structure.rel`` takes, so trees and links can use it."""
        analysis = self.analyse(question)
        return analysis.focus, analysis.qclass

    def analyse(self, question: str | Parsed) -> QuestionAnalysis:
        return self.analyse_many([question])[0]

    def analyse_many(self, questions: Sequence[str | Parsed]) -> list[QuestionAnalysis]:
        """One analysis per question; the trained models run once over the questions not seen lately."""
        keys = [q if isinstance(q, str) else q.text for q in questions]
        with self._lock:
            known = {key: self._remembered[key] for key in keys if key in self._remembered}
        unseen = {key: question for key, question in zip(keys, questions) if key not in known}
        if unseen:
            known.update(zip(unseen, self._analyse(list(unseen.values()))))
        with self._lock:
            for key in keys:
                self._remembered[key] = known[key]
                self._remembered.move_to_end(key)
            while len(self._remembered) > REMEMBERED_QUESTIONS:
                self._remembered.popitem(last=False)
        return [known[key] for key in keys]

    def _analyse(self, questions: Sequence[str | Parsed]) -> list[QuestionAnalysis]:
        texts = [q for q in questions if isinstance(q, str)]
        parsed_texts = dict(zip(texts, parse_many(texts))) if texts else {}
        parsed = [parsed_texts[q] if isinstance(q, str) else q for q in questions]
        # Questions with no word at all cannot go through the CNNs (they raise on empty input).
        usable = [i for i, p in enumerate(parsed) if any(t.strip() for t in p.tokens)]
        probabilities: dict[int, dict[str, float]] = {}
        if self.classifier is not None and usable:
            rows = self.classifier.predict_proba([parsed[i].text for i in usable])
            classes = self.classifier.classes
            probabilities = {i: {c: float(p) for c, p in zip(classes, row)} for i, row in zip(usable, rows)}
        tagged: dict[int, int] = {}
        if self.tagger is not None and usable:
            positions = [[j for j, t in enumerate(parsed[i].tokens) if t.strip()] for i in usable]
            tokens = [[parsed[i].tokens[j] for j in row] for i, row in zip(usable, positions)]
            tagged = {i: row[k] for i, row, k in zip(usable, positions, self.tagger.predict(tokens))}
        analyses = []
        for i, p in enumerate(parsed):
            rule_focus, rule_class = heuristic_focus_and_class(p)
            probs = probabilities.get(i, {})
            qclass = max(probs, key=probs.__getitem__) if probs else rule_class
            focus = tagged.get(i, rule_focus if self.tagger is None else None)
            analyses.append(QuestionAnalysis(qclass, focus, focus_span(p, focus), probs, self.source))
        return analyses

    # ------------------------------------------------------------------ persistence

    def state(self) -> dict[str, Any]:
        """Both classifiers' full states (vocabulary, vectors, weights): a model that embeds this
        in its checkpoint needs no other file to analyse questions the same way."""
        return {
            "classifier": None if self.classifier is None else self.classifier.state(),
            "tagger": None if self.tagger is None else self.tagger.state(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> QuestionAnalyzer:
        classifier = state.get("classifier")
        tagger = state.get("tagger")
        return cls(
            None if classifier is None else QuestionClassifier.from_state(classifier),
            None if tagger is None else FocusTagger.from_state(tagger),
        )
