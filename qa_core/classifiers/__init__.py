"""Question analysis models feeding the focus links: question class (``question_class``) and
question focus (``focus``), after Nicosia (2018), chapter 6.

Both are "pick one of N" models trained with cross-entropy, N being the 6 classes or the
sentence's tokens, so this module holds everything they share: vocabulary and GloVe table,
encoding, training through the shared loop with dev accuracy for selection, batched logits, and
checkpoints (atomic write; a missing or foreign file raises ``InputError``).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

import torch
from torch import nn
from torch.nn import functional as F

from qa_core.checkpoints import Registration, load_checkpoint, rebuild, save_checkpoint
from qa_core.device import default_device
from qa_core.nn.encoders import PAD_ID, WordEmbedding
from qa_core.nn.open_vocabulary import grow_frozen_vocabulary
from qa_core.text.nlp import get_nlp
from qa_core.text.vectors import Vocabulary, embedding_matrix, normalize
from qa_core.training.batching import TensorBatches, pad_ids
from qa_core.training.events import ProgressCallback
from qa_core.training.loop import seed_everything, train
from qa_core.types import InputError, NotTrainedError

PREDICT_BATCH = 256


@dataclass(frozen=True)
class ClassifierConfig:
    """What both classifiers' configs hold: the sizes of the convolutions' ``filters`` and of the
    ``hidden`` ReLU layer before the output, the token inputs, and the optimisation settings of
    ``_fit``. Each model's config subclasses it, adding its own settings and changing only the
    defaults that differ (the focus tagger's are these). A checkpoint stores ``asdict(config)``,
    read back by name, so the field order a subclass gets does not matter."""

    filters: int = 100
    hidden: int = 100
    trainable_embeddings: bool = False
    syntax_dim: int = 10  # 0: words only
    lr: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 16
    max_epochs: int = 40
    patience: int = 15


def syntax_labels() -> dict[str, tuple[str, ...]]:
    """The pipeline's fixed label sets: fine-grained POS tags and dependency labels."""
    nlp = get_nlp()
    return {"tag": tuple(nlp.get_pipe("tagger").labels), "dep": tuple(nlp.get_pipe("parser").labels)}


SyntaxLabels = Mapping[str, Sequence[str]]


def syntax_ids(token_lists: Sequence[Sequence[str]], labels: SyntaxLabels | None = None) -> dict[str, torch.Tensor]:
    """(count, longest) ids of each given token's POS tag and dependency label, 1-based in the
    order of ``labels`` (default: the pipeline's ``syntax_labels``; 0: padding, or a label not
    listed). spaCy tags the tokens as given (no re-tokenisation), so the ids line up with the word
    ids."""
    from spacy.tokens import Doc  # imported on use: the rankers' GPU check runs where spaCy is not

    labels = labels if labels is not None else syntax_labels()
    index = {name: {label: i for i, label in enumerate(values, start=1)} for name, values in labels.items()}
    nlp = get_nlp()
    docs = nlp.pipe(
        (Doc(nlp.vocab, words=list(tokens)) for tokens in token_lists),
        disable=[name for name in nlp.pipe_names if name not in ("tok2vec", "tagger", "parser")],
    )
    rows: dict[str, list[list[int]]] = {name: [] for name in labels}
    for doc in docs:
        rows["tag"].append([index["tag"].get(token.tag_, PAD_ID) for token in doc])
        rows["dep"].append([index["dep"].get(token.dep_, PAD_ID) for token in doc])
    return {name: pad_ids(values) for name, values in rows.items()}


class SyntaxEmbedding(nn.Module):
    """Learned ``dim``-d embeddings of a token's POS tag and of its dependency label, concatenated.

    Why: the classifiers' 50d word vectors say what a word means, not its role in the question;
    the focus is the head noun asked about, a syntactic fact that words alone did not generalise.

    ``labels`` (default: the installed pipeline's) fix what each row means; they are saved with
    the model, so another pipeline version, whose label lists may be ordered differently, cannot
    shift a trained model's ids.
    """

    def __init__(self, dim: int, labels: SyntaxLabels | None = None):
        super().__init__()
        self.labels = {name: tuple(values) for name, values in (labels or syntax_labels()).items()}
        self.tables = nn.ModuleDict(
            {name: nn.Embedding(len(values) + 1, dim, padding_idx=PAD_ID) for name, values in self.labels.items()}
        )
        self.dim = dim * len(self.tables)

    def forward(self, syntax: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([table(syntax[name]) for name, table in self.tables.items()], dim=2)


class EmbeddingModel(nn.Module):
    """Word ids (batch, length), plus the ``syntax_ids`` tensors when the config has a
    ``syntax_dim`` -> logits (batch, choices), reading one GloVe ``embedding``.

    Choices that do not exist for a row (padding tokens) must come out as -inf.
    """

    embedding: WordEmbedding
    syntax: SyntaxEmbedding | None

    def embed_tokens(self, vectors: torch.Tensor, config: ClassifierConfig, syntax: SyntaxLabels | None) -> None:
        """Create the token input layers: the GloVe table, and syntax embeddings (over the
        ``syntax`` label lists, default the pipeline's) if configured."""
        self.embedding = WordEmbedding(vectors, trainable=config.trainable_embeddings)
        self.syntax = SyntaxEmbedding(config.syntax_dim, syntax) if config.syntax_dim else None

    @property
    def token_dim(self) -> int:
        return self.embedding.dim + (self.syntax.dim if self.syntax is not None else 0)

    def token_vectors(self, ids: torch.Tensor, syntax: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """(batch, length, ``token_dim``): each token's word vector [+ its syntax embeddings]."""
        vectors = self.embedding(ids)
        return vectors if self.syntax is None else torch.cat([vectors, self.syntax(syntax)], dim=2)


class TokenModelClassifier(ABC):
    """Shared life cycle of a classifier over normalised word tokens: build vocabulary and GloVe
    table from the training tokens, train, compute logits in batches, save and load.

    Subclasses set ``kind`` (checked on load), ``config_class`` (a ``ClassifierConfig``
    subclass) and ``_build_model``.
    """

    kind: ClassVar[str]
    config_class: ClassVar[type[ClassifierConfig]]

    def __init__(self, config: Any = None) -> None:
        self.config = config if config is not None else self.config_class()
        self.vocab: Vocabulary | None = None
        self.model: EmbeddingModel | None = None
        self.device = default_device()
        self._grow_lock = threading.Lock()

    @abstractmethod
    def _build_model(self, vectors: torch.Tensor, syntax: SyntaxLabels | None = None) -> EmbeddingModel:
        """The untrained network over a (vocabulary, 50) table of initial word vectors and, when
        it reads syntax, the ``syntax`` label lists (default: the pipeline's)."""

    def _init_model(self, token_lists: Sequence[Sequence[str]], seed: int) -> None:
        """Vocabulary of the training tokens, GloVe rows (seeded random for unknown words)."""
        self.vocab = Vocabulary.build([[normalize(t) for t in tokens] for tokens in token_lists])
        vectors = torch.as_tensor(embedding_matrix(self.vocab, seed), dtype=torch.float32)
        self.model = self._build_model(vectors).to(self.device)

    def _encode(self, token_lists: Sequence[Sequence[str]]) -> dict[str, torch.Tensor]:
        """The model's inputs on its device: ``ids`` (count, longest) word ids, plus the
        ``syntax_ids`` tensors when the model reads syntax.

        A frozen table is open-vocabulary, as in ``qa_core.rankers.neural``: a word unseen in
        training that GloVe knows gets its GloVe row appended (frozen rows never move, so no
        earlier prediction changes); other unseen words map to UNK. Without this, a third of the
        held-out focus words (rare nouns: "biochemists", "Yaroslavl") all looked like UNK.
        """
        if self.vocab is None or self.model is None:
            raise NotTrainedError(f"{type(self).__name__} is not trained: call fit() or load()")
        words = [[normalize(t) for t in tokens] for tokens in token_lists]
        if not self.model.embedding.trainable:
            with self._grow_lock:
                self.vocab = grow_frozen_vocabulary(self.vocab, self.model.embedding, {w for row in words for w in row})
        inputs = {"ids": pad_ids([self.vocab.encode(row) for row in words])}
        if self.model.syntax is not None:
            inputs |= syntax_ids(token_lists, self.model.syntax.labels)
        return {name: tensor.to(self.device) for name, tensor in inputs.items()}

    def _trained_model(self) -> EmbeddingModel:
        if self.model is None:
            raise NotTrainedError(f"{type(self).__name__} is not trained: call fit() or load()")
        return self.model

    def _fit(self, train_tokens: Sequence[Sequence[str]], train_targets: Sequence[int],
             dev_tokens: Sequence[Sequence[str]], dev_targets: Sequence[int], *, seed: int, progress: bool,
             callback: ProgressCallback | None) -> dict[str, Any]:
        """Adam on cross-entropy through the shared loop; dev accuracy after every epoch picks the
        kept state. The loop reports it under its ranking name: ``best_dev_map`` is dev accuracy."""
        if not train_tokens or not dev_tokens:
            raise InputError("training needs at least one training and one dev example")
        config: ClassifierConfig = self.config
        seed_everything(seed)
        self._init_model(train_tokens, seed)
        model = self._trained_model()
        batches = TensorBatches(
            self._encode(train_tokens),
            torch.tensor(list(train_targets), device=self.device),
            batch_size=config.batch_size,
        )
        dev_inputs = self._encode(dev_tokens)
        dev_gold = torch.tensor(list(dev_targets))

        def dev_accuracy() -> float:
            return float((self._logits_of(dev_inputs).argmax(dim=1) == dev_gold).float().mean())

        optimizer = torch.optim.Adam(
            [p for p in model.parameters() if p.requires_grad], lr=config.lr, weight_decay=config.weight_decay
        )
        return train(
            model,
            optimizer,
            F.cross_entropy,
            batches,
            dev_accuracy,
            eval_every=len(batches),
            max_epochs=config.max_epochs,
            patience=config.patience,
            seed=seed,
            progress=progress,
            callback=callback,
        )

    @torch.no_grad()
    def _logits_of(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits on the CPU for encoded rows, in eval mode, ``PREDICT_BATCH`` rows at a time."""
        model = self._trained_model()
        was_training = model.training
        model.eval()
        try:
            rows = len(inputs["ids"])
            return torch.cat([
                model(**{name: tensor[start : start + PREDICT_BATCH] for name, tensor in inputs.items()}).cpu()
                for start in range(0, rows, PREDICT_BATCH)
            ])
        finally:
            model.train(was_training)

    def _logits(self, token_lists: Sequence[Sequence[str]]) -> torch.Tensor:
        if any(len(tokens) == 0 for tokens in token_lists):
            raise InputError("cannot classify an empty question")
        if not token_lists:
            return torch.empty(0, 0)
        return self._logits_of(self._encode(token_lists))

    def state(self) -> dict[str, Any]:
        """Config, vocabulary, word vectors (a frozen table is outside the state_dict) and weights."""
        model = self._trained_model()
        assert self.vocab is not None
        return {
            "config": asdict(self.config),
            "vocab": self.vocab.to_list(),
            "vectors": model.embedding.weight.detach().cpu(),
            "syntax_labels": None if model.syntax is None else model.syntax.labels,
            "model": {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()},
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Self:
        # A checkpoint saved before syntax inputs existed has no ``syntax_dim``: it reads words only;
        # one saved before the label lists were stored was trained on this pinned pipeline's.
        classifier = cls(cls.config_class(**{"syntax_dim": 0, **state["config"]}))
        classifier.vocab = Vocabulary.from_list(state["vocab"])
        model = classifier._build_model(state["vectors"], state.get("syntax_labels"))
        model.load_state_dict(state["model"])
        classifier.model = model.to(classifier.device).eval()
        return classifier

    def save(self, path: str | Path) -> Path:
        """Write a checkpoint atomically (see ``qa_core.checkpoints``)."""
        return save_checkpoint(self.kind, self.state(), path)

    @classmethod
    def load(cls, path: str | Path, registration: Registration | None = None) -> Self:
        """Rebuild a saved classifier; a missing, corrupt or other-kind file raises ``InputError``,
        as does one that is not what the store registered (``registration``)."""
        kind, state = load_checkpoint(path, registration)
        if kind != cls.kind:
            raise InputError(f"checkpoint {path} holds a {kind!r} model, not a {cls.kind!r}")
        return rebuild(path, kind, cls.from_state, state)
