"""Growing a frozen GloVe table at prediction time (open vocabulary), for models outside
``NeuralRanker`` (the question classifiers), which follow the same rule as the rankers.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from qa_core.nn.encoders import WordEmbedding
from qa_core.text.vectors import Vocabulary, glove_vectors


def grow_frozen_vocabulary(vocabulary: Vocabulary, embedding: WordEmbedding, words: Iterable[str]) -> Vocabulary:
    """``vocabulary`` extended by the unseen ``words`` GloVe knows, their rows appended to ``embedding``.

    Only for a frozen table: appended rows are exactly what a vocabulary built over these words
    would have held, so ids and scores of known words never change. Returns the (new) vocabulary.
    """
    unseen = sorted({w for w in words if w not in vocabulary})
    vectors = glove_vectors(unseen)
    if not vectors:
        return vocabulary
    embedding.append_rows(torch.as_tensor(np.stack(list(vectors.values()))))
    return vocabulary.extended(list(vectors))
