"""Global-local attention biLSTM (Bachrach et al., 2017): attention over the answer's words that
sees each word's local context (a biLSTM state) and the whole answer (its bag of words) at once.
See ``shared/papers/global-local-attention.md``; the paper's math was lost in extraction, so the
symbols follow that note, and every choice beyond it is named below.

The network (``GlobalLocalAttention``), one shared biLSTM for question and answer:

- tf(x): binary presence vector of x's words over the vocabulary.
- global view g = tanh(W_g tf(a)), 50-d; local view l_t = W_l h_t^a, 140-d.
- joint(x, y) = [lambda_tf x/||x||; lambda_rnn y/||y||] (a zero part stays zero).
- r_t = joint(g, l_t); e_t = cos(P_q u_q, P_a r_t) (140-d projections); alpha = softmax(e) over
  the answer's words (padding masked).
- o_q = joint(tf(q), mean_t h_t^q); o_a = joint(tf(a), sum_t alpha_t h_t^a); score = cos(o_q, o_a).
- Loss max(0, M - s(q, a+) + s(q, a-)) with one distractor per correct answer, drawn from the same
  question's incorrect candidates and redrawn every epoch (``PairwiseBatches``); Adam, dropout on
  the biLSTM states, early stopping on dev MAP.

Choices the paper leaves open (documented deviations):

- u_q, "a vector representing the question" in the attention, is the final question
  representation o_q. P_q u_q is computed without building the |V|-wide vector: P_q's TF block is
  a table of one row per word, summed over the question's words and scaled like tf(q)/||tf(q)||.
- The TF vocabulary is the ranker's vocabulary (train and dev words) at training time. W_g and
  P_q's TF block start at zero and have no weight decay, so a word that never occurs in a training
  text keeps an exactly zero row (Adam never moves a parameter whose gradient is always zero):
  dev-only words and the words the open vocabulary appends at scoring time add nothing to the
  learned parts. The TF cosine inside cos(o_q, o_a) has no parameters and counts every word of
  the (open) vocabulary, so a name seen only at test time still matches itself. UNK is no word:
  it is left out of every TF vector.
- Sizes: biLSTM 141 per direction as in Tan et al. (2016), whose setup the paper copies (its own
  numbers were lost); GloVe 6B 50d frozen instead of word2vec 100d; lambda_tf = lambda_rnn = 1
  (the paper's example of equal weight); margin 0.1, 50 triples a batch, dropout 0.3 on the
  biLSTM states and Adam at 1e-3, chosen on dev MAP (``benchmarks/recurrent_selection.py``).
- Questions whose candidates are all correct or all incorrect give no training triple (the
  paper's InsuranceQA pools always have both); they still count in dev MAP as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from qa_core.classifiers.analysis import QuestionAnalyzer
from qa_core.nn.attention import attend, masked_softmax
from qa_core.nn.encoders import PAD_ID, WordEmbedding
from qa_core.nn.losses import PairwiseHingeLoss
from qa_core.nn.recurrent import LSTMEncoder, read_mask
from qa_core.rankers.base import Explanation
from qa_core.rankers.neural import NEURAL, NeuralConfig, NeuralRanker, Pair, spread, token_positions
from qa_core.text.links import lexical_links
from qa_core.text.vectors import UNK
from qa_core.training import loop
from qa_core.training.batching import PairwiseBatches, trim_padding
from qa_core.types import InputError, Question


@dataclass(frozen=True)
class GlobalLocalConfig(NeuralConfig):
    """The paper's view sizes; the rest chosen on dev MAP. ``batch_size`` counts triples."""

    hidden: int = 141  # per direction
    global_dim: int = 50
    local_dim: int = 140
    attention_dim: int = 140
    lambda_tf: float = 1.0
    lambda_rnn: float = 1.0
    margin: float = 0.1
    dropout: float = 0.3
    learning_rate: float = 1e-3
    eval_every: int = 10


def present_words(ids: torch.Tensor) -> torch.Tensor:
    """(batch, length) bool: True at the first occurrence of each word of a row (PAD and UNK excluded).

    Summing over True positions sums over the words of tf(x), each once.
    """
    earlier = torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool, device=ids.device).tril(diagonal=-1)
    repeated = ((ids.unsqueeze(2) == ids.unsqueeze(1)) & earlier).any(dim=2)
    return (ids != PAD_ID) & (ids != UNK) & ~repeated


def joint(x: torch.Tensor, y: torch.Tensor, lambda_x: float, lambda_y: float) -> torch.Tensor:
    """[lambda_x x/||x||; lambda_y y/||y||] over the last dimension; a zero part stays zero."""
    return torch.cat([lambda_x * F.normalize(x, dim=-1), lambda_y * F.normalize(y, dim=-1)], dim=-1)


class GlobalLocalAttention(nn.Module):
    """The network; ``tf_size`` is the TF vocabulary (ids at or beyond it have no learned row)."""

    def __init__(self, vectors: torch.Tensor, tf_size: int, config: GlobalLocalConfig):
        super().__init__()
        self.embedding = WordEmbedding(vectors, trainable=config.trainable_embeddings)
        self.encoder = LSTMEncoder(self.embedding.dim, config.hidden, bidirectional=True)
        states = self.encoder.output_dim
        self.tf_size = tf_size
        self.lambda_tf, self.lambda_rnn = config.lambda_tf, config.lambda_rnn
        # Word-indexed tables (rows of W_g^T and of P_q's TF block), zero so unseen words stay zero.
        self.global_view = nn.Parameter(torch.zeros(tf_size, config.global_dim))
        self.question_tf_projection = nn.Parameter(torch.zeros(tf_size, config.attention_dim))
        self.local_view = nn.Linear(states, config.local_dim, bias=False)
        self.question_rnn_projection = nn.Linear(states, config.attention_dim, bias=False)
        self.answer_projection = nn.Linear(config.global_dim + config.local_dim, config.attention_dim, bias=False)
        self.dropout = nn.Dropout(config.dropout)

    def bag(self, ids: torch.Tensor, present: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        """table^T tf(x): the sum of the rows of the row's present words that the table has."""
        known = present & (ids < self.tf_size)
        rows = F.embedding(ids.clamp(max=self.tf_size - 1), table)
        return (rows * known.unsqueeze(-1).to(rows.dtype)).sum(dim=1)

    def attend(self, question: torch.Tensor, answer: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded ids -> (batch,) scores cos(o_q, o_a) and (batch, answer length) attention alpha."""
        question, answer = trim_padding(question), trim_padding(answer)
        q_mask, a_mask = read_mask(question), read_mask(answer)
        q_states = self.dropout(self.encoder(self.embedding(question), q_mask)[0])
        a_states = self.dropout(self.encoder(self.embedding(answer), a_mask)[0])
        q_present, a_present = present_words(question), present_words(answer)
        q_count, a_count = q_present.sum(dim=1).to(q_states.dtype), a_present.sum(dim=1).to(a_states.dtype)

        # u_q = o_q's two parts, projected by P_q (the TF part without building tf(q)).
        q_mean = q_states.sum(dim=1) / q_mask.sum(dim=1, keepdim=True)  # states are zero at padding
        q_tf_sum = self.bag(question, q_present, self.question_tf_projection)
        q_tf_part = q_tf_sum / q_count.clamp(min=1).sqrt().unsqueeze(1)
        query = self.lambda_tf * q_tf_part + self.lambda_rnn * self.question_rnn_projection(F.normalize(q_mean, dim=-1))

        global_view = torch.tanh(self.bag(answer, a_present, self.global_view))
        local_view = self.local_view(a_states)
        global_views = global_view.unsqueeze(1).expand(-1, local_view.shape[1], -1)
        r = joint(global_views, local_view, self.lambda_tf, self.lambda_rnn)
        logits = F.cosine_similarity(query.unsqueeze(1), self.answer_projection(r), dim=-1)
        alpha = masked_softmax(logits, a_mask)

        # cos(o_q, o_a) from its parts: the TF parts' unit vectors meet in the shared words.
        same = question.unsqueeze(2) == answer.unsqueeze(1)
        shared = (same & a_present.unsqueeze(1)).any(dim=2) & q_present
        tf_dot = shared.sum(dim=1) / (q_count * a_count).clamp(min=1).sqrt()
        q_rnn, a_rnn = F.normalize(q_mean, dim=-1), F.normalize(attend(a_states, alpha), dim=-1)
        dot = self.lambda_tf**2 * tf_dot + self.lambda_rnn**2 * (q_rnn * a_rnn).sum(dim=-1)
        q_norm = (self.lambda_tf**2 * (q_count > 0) + self.lambda_rnn**2 * q_rnn.square().sum(dim=-1)).sqrt()
        a_norm = (self.lambda_tf**2 * (a_count > 0) + self.lambda_rnn**2 * a_rnn.square().sum(dim=-1)).sqrt()
        return dot / (q_norm * a_norm).clamp(min=1e-8), alpha

    def forward(self, question: torch.Tensor, answer: torch.Tensor) -> torch.Tensor:
        return self.attend(question, answer)[0]


class GlobalLocalRanker(NeuralRanker):
    name = "global_local"
    title = "Global-local attention biLSTM (Bachrach et al. 2017)"
    config_class = GlobalLocalConfig
    capabilities = replace(NEURAL, explains=frozenset({"answer_weights", "links"}))
    config: GlobalLocalConfig

    def __init__(self, config: GlobalLocalConfig | None = None):
        super().__init__(config)
        self.tf_size = 0

    def prepare(
        self, train: Sequence[Question], dev: Sequence[Question], seed: int, analyzer: QuestionAnalyzer | None
    ) -> None:
        """Fix the TF vocabulary: the vocabulary as built from the train and dev texts."""
        self.tf_size = len(self.vocabulary)

    def extra_state(self) -> dict[str, Any]:
        return {"tf_size": self.tf_size}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.tf_size = int(state["tf_size"])

    def build_model(self, vectors: torch.Tensor) -> GlobalLocalAttention:
        return GlobalLocalAttention(vectors, self.tf_size, self.config)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        """Adam without weight decay (the paper regularises with dropout and early stopping)."""
        return torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=self.config.learning_rate)

    def loss(self) -> nn.Module:
        return PairwiseHingeLoss(self.config.margin)

    def relevance(self, output: torch.Tensor) -> torch.Tensor:
        """The score is the cosine itself."""
        return output.double()

    def batches(self, inputs: dict[str, torch.Tensor], groups: torch.Tensor, labels: torch.Tensor) -> loop.BatchFactory:
        """Triples of one question's correct candidate and a sampled incorrect one (questions by text)."""
        batches = PairwiseBatches(inputs, groups, labels, self.config.batch_size)
        if not batches.triples:
            raise InputError(
                f"{self.name} learns from questions with both a correct and an incorrect candidate; "
                "the training split has none"
            )
        return batches

    def explain_pair(self, pair: Pair) -> Explanation:
        """The attention alpha over the candidate's words (raw; sums to 1 over the words read)."""
        model = self.model()
        model.eval()
        inputs = {name: tensor.to(self._device) for name, tensor in self.encode([pair]).items()}
        with torch.inference_mode():
            score, alpha = model.attend(**inputs)
        a_parsed = pair.answer
        positions = token_positions(a_parsed, self.config.max_answer_len)
        return Explanation(
            score=float(self.relevance(score)[0]),
            question_tokens=list(pair.question.tokens),
            answer_tokens=list(a_parsed.tokens),
            answer_weights=spread(alpha[0].tolist(), positions, len(a_parsed.tokens)),
            weight_kind="attention",
            links=lexical_links(pair.question, a_parsed),
        )
