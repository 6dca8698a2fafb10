"""The shared pointwise training loop: mini-batches, dev MAP every k batches, patience, best state.

Every neural ranker (SM-CNN now; the attention LSTM, CNN_WO+SO and MP-HCNN later) builds its
tensors, model, optimizer and dev scorer, then hands them to :func:`train`. Nothing here knows
about a particular model: a batch is ``(inputs, targets)`` and the loss is ``loss(model(**inputs),
targets)``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch
from torch import nn

from qa_core.training.batching import Batch
from qa_core.training.events import ProgressCallback, TrainingEvent

BatchFactory = Callable[[torch.Generator], Iterable[Batch]]
"""Yields one epoch of batches, shuffled with the generator it is given (e.g. ``TensorBatches``)."""


def seed_everything(seed: int) -> torch.Generator:
    """Seed torch (init, dropout), numpy and random; return a generator for batch order.

    Call it before building a model so that initialisation is reproducible too.
    """
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    return torch.Generator().manual_seed(seed)


def _cpu_copy(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().to("cpu", copy=True) for name, tensor in model.state_dict().items()}


def train(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batches: BatchFactory,
    evaluate_dev: Callable[[], float],
    *,
    eval_every: int = 10,
    max_epochs: int = 25,
    patience: int = 5,
    seed: int = 1,
    progress: bool = True,
    callback: ProgressCallback | None = None,
) -> dict[str, Any]:
    """Train ``model`` in place and leave it in its best-on-dev state (in eval mode).

    Dev MAP (``evaluate_dev``, called in eval mode) is checked every ``eval_every`` mini-batches,
    counted across epochs, and once more at the end of an epoch whose last batch was not checked,
    so every epoch ends with an up-to-date score. Training stops after ``max_epochs`` or when
    ``patience`` epochs in a row brought no dev improvement. ``callback`` receives a
    ``TrainingEvent`` at every check (loss: mean since the previous check).
    """
    generator = seed_everything(seed)
    started = time.perf_counter()
    run = _DevSelection(model, evaluate_dev, max_epochs, callback)
    epoch = 0
    model.train()
    for epoch in range(1, max_epochs + 1):
        bar = _progress_bar(batches, generator, epoch, max_epochs) if progress else None
        for inputs, targets in bar if bar is not None else batches(generator):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(**inputs), targets)
            loss.backward()
            optimizer.step()
            run.pending_losses.append(loss.item())
            run.batches_seen += 1
            if run.batches_seen % eval_every == 0:
                run.check(epoch)
                if bar is not None:
                    bar.set_postfix(dev_map=f"{run.history[-1]['dev_map']:.4f}", best=f"{run.best_map:.4f}")
        if run.pending_losses:
            run.check(epoch)
        if epoch - run.best_epoch >= patience:
            break

    model.load_state_dict(run.best_state)
    model.eval()
    return {
        "best_dev_map": run.best_map,
        "best_epoch": run.best_epoch,
        "epochs_run": epoch,
        "batches": run.batches_seen,
        "stopped_early": epoch < max_epochs,
        "seconds": round(time.perf_counter() - started, 2),
        "history": run.history,
    }


class _DevSelection:
    """The dev checks of one run: the losses since the last check, the history of checks, and the
    best dev MAP so far with its epoch and a CPU copy of its state."""

    def __init__(self, model: nn.Module, evaluate_dev: Callable[[], float], max_epochs: int,
                 callback: ProgressCallback | None) -> None:
        self.model, self.evaluate_dev, self.max_epochs, self.callback = model, evaluate_dev, max_epochs, callback
        self.best_map, self.best_epoch, self.best_state = float("-inf"), 0, _cpu_copy(model)
        self.history: list[dict[str, Any]] = []
        self.batches_seen = 0
        self.pending_losses: list[float] = []

    def check(self, epoch: int) -> None:
        """Score dev (in eval mode), record the point, keep the state if it is the best so far."""
        self.model.eval()
        dev_map = float(self.evaluate_dev())
        self.model.train()
        loss = float(np.mean(self.pending_losses)) if self.pending_losses else float("nan")
        self.pending_losses.clear()
        self.history.append({"epoch": epoch, "batch": self.batches_seen, "loss": loss, "dev_map": dev_map})
        if dev_map > self.best_map:
            self.best_map, self.best_epoch, self.best_state = dev_map, epoch, _cpu_copy(self.model)
        if self.callback is not None:
            self.callback(TrainingEvent(epoch, self.max_epochs, "epoch", self.batches_seen, loss, dev_map))


def _progress_bar(batches: BatchFactory, generator: torch.Generator, epoch: int, max_epochs: int) -> Any:
    """One epoch's batches behind a tqdm bar on stderr."""
    from tqdm.auto import tqdm  # imported on use: the rankers' GPU check runs where tqdm is not

    total = len(batches) if hasattr(batches, "__len__") else None  # a factory may know its batch count
    return tqdm(batches(generator), total=total, desc=f"epoch {epoch}/{max_epochs}", leave=False)


def weight_decay_groups(
    model: nn.Module, default: float, by_module_type: dict[type[nn.Module], float]
) -> list[dict[str, Any]]:
    """Optimizer parameter groups with an L2 strength per module type (e.g. conv 1e-5, rest 1e-4).

    Each parameter takes the strength of the module that owns it directly; frozen parameters are
    left out, so a frozen embedding never decays.
    """
    decays: dict[float, list[nn.Parameter]] = {}
    for module in model.modules():
        decay = by_module_type.get(type(module), default)
        for parameter in module.parameters(recurse=False):
            if parameter.requires_grad:
                decays.setdefault(decay, []).append(parameter)
    return [{"params": params, "weight_decay": decay} for decay, params in decays.items()]
