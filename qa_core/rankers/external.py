"""External systems as rankers (issue 36): a stored run and a live scoring service look to every
page like any other model, through the same contract (``score_pools``, ``rank``, ``explain``).

Neither class sets ``name`` on the class, so the registry does not list them as models: a system
is data in the store (``qa_core.services.systems`` builds the ranker for one by its name), and its
instance carries the name the pages show (``system:<name>``).

- ``RunRanker`` scores a dataset's questions from the run's scores. Candidates the run does not
  rank score below every candidate it ranks (as trec_eval counts unretrieved documents), and a
  question it does not cover scores all its candidates alike, so the tie rule
  (``qa_core.ordering``) orders them; ``covered`` says which pairs it ranks (nothing else enters a
  depth-k pool or an agreement) and ``qa_core.services.systems`` reports its coverage. A typed
  question, which no run can have ranked, is an ``InputError``. A static ranking cannot be
  explained word by word: ``explain`` says so.
- ``ServiceRanker`` sends each pool to the service (``service_client``). Its word importance is
  occlusion (``qa_core.rankers.occlusion``, the ``occlusion`` explainer of every ranker): each
  answer word dropped in turn, the edits scored through ``Ranker.score_edits`` (the path of
  counterfactual edits and of the faithfulness deletions), so one explanation is one batched
  request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from qa_core.rankers.base import CandidateInput, Capabilities, Explanation, Pool, Ranker, as_candidates, candidate_at
from qa_core.rankers.occlusion import OCCLUSION, occlude
from qa_core.rankers.service_client import ServiceClient
from qa_core.text.links import lexical_links
from qa_core.text.nlp import parse
from qa_core.types import InputError

NO_WORD_EXPLANATION = ("a run is a static ranking: it cannot be explained word by word (no model is there to "
                       "rescore an edited answer); add the system as a service to explain it")


class RunRanker(Ranker):
    """A stored run of one dataset, as a ranker of that dataset's questions."""

    title = "stored run (external system)"
    capabilities = Capabilities(explains=frozenset())

    def __init__(self, name: str, dataset: str, scores: Mapping[str, Mapping[str, float]],
                 question_texts: Mapping[str, str]) -> None:
        """``scores``: ``{qid: {doc_id: score}}``; ``question_texts``: ``{qid: text}`` of the dataset,
        how a pool (which carries its question's text, not its qid) finds its question's scores."""
        super().__init__()
        self.name = name
        self.dataset = dataset
        self._by_text: dict[str, dict[str, float]] = {}
        for qid, text in question_texts.items():
            self._by_text.setdefault(text, {}).update(scores.get(qid, {}))

    def score_pools(self, pools: Sequence[Pool]) -> list[np.ndarray]:
        out = []
        for question, candidates in pools:
            scores = self._by_text.get(question)
            if scores is None:
                raise InputError(f"{self.name} is a run over {self.dataset}'s questions: it has no ranking of a "
                                 "question typed here (a service scores any question)")
            floor = min(scores.values(), default=0.0) - 1.0
            out.append(np.array([scores.get(c.doc_id, floor) for c in as_candidates(candidates)], dtype=np.float64))
        return out

    def covered(self, pools: Sequence[Pool]) -> list[np.ndarray]:
        """The pairs the run ranks: none of a question it lacks, nor a candidate it did not rank."""
        return [np.array([c.doc_id in self._by_text.get(question, {}) for c in as_candidates(candidates)], dtype=bool)
                for question, candidates in pools]

    def explain(self, question: str, candidates: Sequence[CandidateInput], index: int) -> Explanation:
        raise InputError(f"{self.name}: {NO_WORD_EXPLANATION}")


class ServiceRanker(Ranker):
    """A live scoring service, as a ranker of any question."""

    title = "scoring service (external system)"
    capabilities = Capabilities(explains=frozenset({"answer_weights", "links"}), own_weights=OCCLUSION)

    def __init__(self, name: str, client: ServiceClient) -> None:
        super().__init__()
        self.name = name
        self.client = client

    def score_pools(self, pools: Sequence[Pool]) -> list[np.ndarray]:
        return self.client.score_pools([(question, as_candidates(candidates)) for question, candidates in pools])

    def explain(self, question: str, candidates: Sequence[CandidateInput], index: int) -> Explanation:
        """Occlusion: each word's weight is how much the score of its words, joined, drops without it (one
        batched request: ``occlude``)."""
        q_parsed, a_parsed = parse(question), parse(candidate_at(as_candidates(candidates), index).text)
        tokens = list(a_parsed.tokens)
        occluded = occlude(self, question, candidates, index, tokens)
        # The pair's shared-lemma links, as the baselines draw them: they belong to the texts, not the model.
        return Explanation(score=occluded.score, question_tokens=list(q_parsed.tokens), answer_tokens=tokens,
                           answer_weights=occluded.weights, weight_kind=OCCLUSION,
                           links=lexical_links(q_parsed, a_parsed))
