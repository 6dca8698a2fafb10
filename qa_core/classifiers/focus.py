"""Question focus: which token of a question names what is asked for ("Who is the #author of...").

Tagger as specified in Nicosia (2018): 4 stacked width-10 convolutions of 100 maps, a shared
(position-wise) 100-d ReLU layer, a linear layer to one score per token, softmax over the
sentence's tokens; L2 1e-4, batch 16. Word vectors are frozen GloVe 50d, open-vocabulary (see
``qa_core.classifiers``): a third of held-out focus words never occur in training.

Deviation: each token's input also carries learned embeddings of its spaCy POS tag and dependency
label (``syntax_dim``, see ``qa_core.classifiers``; 0 gives the thesis's words-only input). The focus is the
head noun of the phrase asked about, which is syntax: with 50d word vectors alone the tagger fits
its training questions (0.98) but reaches 0.79 in cross-validation (docs/benchmarks.md has both).

The thesis trains with Adam 1e-4 for 300 epochs; here Adam 1e-3 for at most 40 epochs (about the
same distance travelled, at a fraction of the CPU time), stopping after 15 epochs without a better
held-out accuracy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from qa_core.classifiers import ClassifierConfig, EmbeddingModel, SyntaxLabels, TokenModelClassifier
from qa_core.nn.encoders import PAD_ID
from qa_core.training.events import ProgressCallback
from qa_core.types import InputError


@dataclass(frozen=True)
class FocusConfig(ClassifierConfig):
    layers: int = 4
    width: int = 10


class FocusCNN(EmbeddingModel):
    """Word ids -> one score per token, -inf on padding (a masked softmax gives it no mass).

    Convolutions pad with zeros to keep the length (width 10: 4 columns before, 5 after) and
    padding columns are zeroed again after every layer, so a real token sees exactly what it would
    at the sentence edge: scores do not depend on how much padding the batch adds.
    """

    def __init__(self, vectors: torch.Tensor, config: FocusConfig, syntax: SyntaxLabels | None = None):
        super().__init__()
        self.embed_tokens(vectors, config, syntax)
        inputs = [self.token_dim] + [config.filters] * (config.layers - 1)
        self.same_length = ((config.width - 1) // 2, config.width // 2)
        self.convs = nn.ModuleList(
            nn.Conv1d(size, config.filters, kernel_size=config.width) for size in inputs
        )
        self.hidden = nn.Linear(config.filters, config.hidden)
        self.score = nn.Linear(config.hidden, 1)

    def forward(self, ids: torch.Tensor, **syntax: torch.Tensor) -> torch.Tensor:
        mask = ids != PAD_ID
        keep = mask.unsqueeze(1).to(torch.float32)
        columns = self.token_vectors(ids, syntax).transpose(1, 2)
        for conv in self.convs:
            columns = torch.relu(conv(F.pad(columns, self.same_length))) * keep
        scores = self.score(torch.relu(self.hidden(columns.transpose(1, 2)))).squeeze(-1)
        return scores.masked_fill(~mask, float("-inf"))


class FocusTagger(TokenModelClassifier):
    """Predicts the focus token index of whitespace-tokenised questions."""

    kind = "question_focus"
    config_class = FocusConfig

    def _build_model(self, vectors: torch.Tensor, syntax: SyntaxLabels | None = None) -> EmbeddingModel:
        return FocusCNN(vectors, self.config, syntax)

    @staticmethod
    def _check_targets(token_lists: Sequence[Sequence[str]], focus: Sequence[int]) -> list[int]:
        if len(token_lists) != len(focus):
            raise InputError("questions and focus indices differ in number")
        for number, (tokens, index) in enumerate(zip(token_lists, focus, strict=True), start=1):
            if not 0 <= index < len(tokens):
                raise InputError(f"question {number}: focus index {index} outside its {len(tokens)} tokens")
        return list(focus)

    def fit(self, token_lists: Sequence[Sequence[str]], focus: Sequence[int], dev_token_lists: Sequence[Sequence[str]],
            dev_focus: Sequence[int], *, seed: int = 1, progress: bool = False,
            callback: ProgressCallback | None = None) -> dict[str, Any]:
        """Train on tokenised questions with their focus index; keep the best-dev-accuracy state.

        Returns the shared loop's report (``best_dev_map`` holds the dev accuracy).
        """
        return self._fit(token_lists, self._check_targets(token_lists, focus), dev_token_lists,
                         self._check_targets(dev_token_lists, dev_focus), seed=seed, progress=progress, callback=callback)

    def predict_proba(self, token_lists: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """One probability per token for each question (each array sums to 1)."""
        probabilities = torch.softmax(self._logits(token_lists), dim=1).numpy()
        return [row[: len(tokens)] for row, tokens in zip(probabilities, token_lists, strict=True)]

    def predict(self, token_lists: Sequence[Sequence[str]]) -> list[int]:
        return [int(row.argmax()) for row in self.predict_proba(token_lists)]
