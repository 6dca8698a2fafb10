"""Training processes killed while saving their checkpoint, for ``test_checkpoint_files``' gc test.

A module of its own so that the spawned process imports only ``qa_core.checkpoints`` (and torch, to
save): through the test module it would load spaCy, SQLAlchemy and every service, 3 s a process.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from qa_core.checkpoints import atomic_file, save_checkpoint


def killed_while_writing(path: Path) -> None:
    """A training process killed inside the atomic write of its checkpoint."""
    with atomic_file(path) as handle:
        handle.write(b"half a checkpoint")
        handle.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def killed_before_registering(path: Path, kind: str, state: dict[str, Any]) -> None:
    """A training process killed after writing its checkpoint (``registry.save``'s own call), before
    registering it."""
    save_checkpoint(kind, state, path)
    os.kill(os.getpid(), signal.SIGKILL)
