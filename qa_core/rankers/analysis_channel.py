"""The shared part of the neural rankers with a channel that reads the question analysis (focus
and class): CNN_WO+SO's semantic overlap and compare-aggregate's answer-type match.

The analyzer the model was fit with is kept and saved inside its checkpoint, so a ranking and its
explanation read the same focus and class as training did, whatever the store's current analyzer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from qa_core.classifiers.analysis import QuestionAnalysis, QuestionAnalyzer
from qa_core.rankers.neural import NEURAL, NeuralConfig, NeuralRanker, Pair
from qa_core.types import Question

NO_ANALYSIS = QuestionAnalysis(None, None, None)


class AnalysisReadingRanker(NeuralRanker):
    """A neural ranker that may read the question analysis; ``reads_analysis`` says whether this
    configuration does (when not, every analysis is empty and nothing is kept)."""

    capabilities = replace(NEURAL, reads=frozenset({"question_analysis"}))

    def __init__(self, config: NeuralConfig | None = None) -> None:
        super().__init__(config)
        self.analyzer: QuestionAnalyzer | None = None

    def reads_analysis(self) -> bool:
        """Whether the configured model has a channel that reads the analysis."""
        return True

    def analyzer_to_keep(self, given: QuestionAnalyzer | None) -> QuestionAnalyzer:
        """The analyzer fitting keeps: the given one, else the wh-word rules."""
        return given if given is not None else QuestionAnalyzer()

    def prepare(
        self, train: Sequence[Question], dev: Sequence[Question], seed: int, analyzer: QuestionAnalyzer | None
    ) -> None:
        if self.reads_analysis():
            self.analyzer = self.analyzer_to_keep(analyzer)

    def _analyzer(self) -> QuestionAnalyzer:
        return self.analyzer if self.analyzer is not None else QuestionAnalyzer()

    def question_analysis(self, question: str) -> QuestionAnalysis | None:
        return self._analyzer().analyse(question) if self.reads_analysis() else None

    def analyses(self, pairs: Sequence[Pair]) -> list[QuestionAnalysis]:
        """One analysis per pair (the analyzer runs its models once per distinct question)."""
        if not self.reads_analysis():
            return [NO_ANALYSIS for _ in pairs]
        return self._analyzer().analyse_many([p.question for p in pairs])

    def extra_state(self) -> dict[str, Any]:
        return {"analyzer": None if self.analyzer is None else self.analyzer.state()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        stored = state.get("analyzer")
        self.analyzer = None if stored is None else QuestionAnalyzer.from_state(stored)
