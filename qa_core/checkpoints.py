"""Atomic file writes and the one checkpoint format of every trained model (rankers, classifiers).

A file is written to a temporary sibling, flushed to disk and renamed over the target
(``os.replace``), so a crash or a killed training run leaves the old file or the complete new one,
never a truncated file that a later load or evaluation would read.
"""

from __future__ import annotations

import errno
import hashlib
import io
import math
import os
import pickle
import re
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from qa_core import config
from qa_core.types import InputError, StorageError

CHECKPOINT_FORMAT = 1
T = TypeVar("T")
ZIP_MAGIC = b"PK\x03\x04"  # torch.save's archive: every checkpoint this project writes
PICKLE_PROTOCOL_MARK = b"\x80"  # the first byte of a pickle of protocol 2 or later


@dataclass(frozen=True)
class Registration:
    """What the store registered a checkpoint as (``model_versions``): loading refuses a file that
    is not that model, so a file copied over a registered one is never served under its name."""

    name: str
    kind: str
    version_id: int
    sha256: str | None  # None: registered before the store kept hashes (checked by kind and name only)

    @classmethod
    def of(cls, version: Mapping[str, Any]) -> Registration:
        """The registration of a ``model_versions`` record as the store hands it out."""
        return cls(version["name"], version["kind"], version["id"], version.get("checkpoint_sha256"))

    def describe(self) -> str:
        return f"version id {self.version_id} of model {self.name!r} (a {self.kind!r} model)"


def file_sha256(path: str | Path) -> str | None:
    """The content hash the store keeps for a checkpoint file; ``None`` when there is no such file."""
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None


@contextmanager
def atomic_file(path: str | Path, mode: str = "wb", **open_kwargs: Any) -> Iterator[IO[Any]]:
    """A handle on a temporary file beside ``path`` that replaces ``path`` when the block succeeds.

    A filesystem error (disk full, no permission, a folder or a file in the way) is one
    ``StorageError`` naming ``path``, never the temporary file.
    """
    with staged_file(path, mode, **open_kwargs) as (handle, staged):
        yield handle
    put_in_place(staged, Path(path))


@contextmanager
def staged_file(path: str | Path, mode: str = "wb", **open_kwargs: Any) -> Iterator[tuple[IO[Any], Path]]:
    """A handle on a new temporary file beside ``path`` and its name: on disk when the block
    succeeds, for the caller to ``put_in_place`` (or delete) later; deleted when the block fails.
    Errors as ``atomic_file``'s."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a folder; give the name of a file to write")
    temp_name = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, mode, **open_kwargs) as handle:
            yield handle, Path(temp_name)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException as error:
        if temp_name is not None:
            Path(temp_name).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise write_error(path, error) from None
        raise


def put_in_place(staged: Path, path: Path) -> None:
    """Rename the staged file over ``path`` (atomically); on failure it is deleted, ``StorageError``."""
    try:
        os.replace(staged, path)
    except OSError as error:
        staged.unlink(missing_ok=True)
        raise write_error(path, error) from None


def write_error(path: Path, error: OSError) -> StorageError:
    """One sentence for a failed write of ``path``."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return StorageError(f"cannot write {path}: the disk is full ({error.strerror}); nothing was written")
    return StorageError(f"cannot write {path}: {error.strerror or error}")


def save_checkpoint(kind: str, state: dict[str, Any], path: str | Path, name: str | None = None) -> Path:
    """Write ``{"format", "kind", "name", "state"}`` atomically; ``kind`` says which class can load
    it, ``name`` (default: the kind) which model it is; the store adds ``version_id`` when it
    registers it (``register_checkpoint``)."""
    import torch  # here, not at the top: exporters use ``atomic_file`` without loading torch

    with atomic_file(path) as handle:
        torch.save({"format": CHECKPOINT_FORMAT, "kind": kind, "name": name or kind, "state": state}, handle)
    return Path(path)


def load_checkpoint(path: str | Path, registration: Registration | None = None) -> tuple[str, dict[str, Any]]:
    """``(kind, state)`` of a checkpoint, on the CPU; a missing, damaged, foreign or unsafe file
    raises ``InputError``, and so does, with ``registration``, a file that is not the one the store
    registered (another content hash, kind, model name or version id): one sentence, nothing loaded.
    """
    payload = _payload(Path(path), registration)
    return payload["kind"], payload["state"]


@dataclass(frozen=True)
class Stamp:
    """A checkpoint as the store registers it: its content hash, and the stamped content (the
    version id written in) staged beside the file, put in place only once the registration commits,
    so a rolled-back registration leaves the file as it was."""

    path: Path
    sha256: str | None
    staged: Path | None  # None: nothing to write (the file keeps its content)

    def apply(self) -> None:
        """The registration committed: the stamped content replaces the file."""
        if self.staged is not None:
            put_in_place(self.staged, self.path)

    def discard(self) -> None:
        """The registration rolled back: the file stays as it was."""
        if self.staged is not None:
            self.staged.unlink(missing_ok=True)


def register_checkpoint(path: str | Path, version_id: int, name: str, kind: str, *, stamp: bool) -> Stamp:
    """The checkpoint registered as ``version_id`` of model ``name`` (a ``kind`` model): with ``stamp``,
    its content with that id written in, staged (see ``Stamp``), so the file says which version it
    is, and that content's hash, which the store keeps. A checkpoint holding another model (kind or
    name) is refused (``InputError``, one sentence): loading would refuse it later, after it was
    promoted. No hash when there is no such file; a file that is no readable checkpoint is hashed as
    it is (loading it will refuse it and fall back). A link's target is stamped, not the link replaced."""
    path = Path(path).resolve()
    try:
        payload = _payload(path, None)
    except InputError:
        payload = None
    if payload is not None:
        held = (payload["kind"], payload.get("name", payload["kind"]))
        if held != (kind, name):
            raise InputError(
                f"checkpoint {path} holds model {held[1]!r} (a {held[0]!r} model), not model {name!r} (a {kind!r} "
                "model); nothing was registered"
            )
        if stamp:
            import torch

            with staged_file(path) as (handle, staged):
                torch.save({**payload, "version_id": version_id}, handle)
            return Stamp(path, file_sha256(staged), staged)
    return Stamp(path, file_sha256(path), None)


def _payload(path: Path, registration: Registration | None) -> dict[str, Any]:
    """The checkpoint's whole dict, checked (see ``load_checkpoint``).

    ``weights_only=True``: only tensors and plain data (dicts, lists, tuples, strings, numbers) are
    unpickled, so a file crafted to run code, or holding objects of another program, is refused
    before anything in it runs. Every state this project writes is plain data (vocabularies as
    lists, configs as dicts, arrays as tensors), including files written before this check.
    """
    payload = _unpickle(path, _registered_bytes(path, registration))
    if not (
        isinstance(payload, dict)
        and payload.get("format") == CHECKPOINT_FORMAT
        and isinstance(payload.get("kind"), str)
        and isinstance(payload.get("state"), dict)
    ):
        raise InputError(
            f"checkpoint {path} is not a Rerank Lab checkpoint (expected format {CHECKPOINT_FORMAT} with a kind and a state)"
        )
    if registration is not None:
        _check_registered_model(path, payload, registration)
    return payload


def _registered_bytes(path: Path, registration: Registration | None) -> bytes:
    """The file's bytes; ``InputError`` for a missing or unreadable file, or another content than
    the registered hash."""
    if path.is_dir():
        raise InputError(f"checkpoint {path} is a folder, not a file")
    if not path.is_file():
        raise InputError(f"checkpoint not found: {path}")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"checkpoint {path} cannot be read: {error.strerror or error}") from None
    if registration is not None and registration.sha256 and hashlib.sha256(data).hexdigest() != registration.sha256:
        raise InputError(
            f"checkpoint {path} is not the file registered as {registration.describe()}: its content changed "
            "since (another file copied over it, or damage); refused, nothing in it was loaded"
        )
    return data


def _unpickle(path: Path, data: bytes) -> Any:
    """The torch archive's content, unpickled weights-only (see ``_payload``)."""
    import torch

    if not data.startswith(ZIP_MAGIC) and data.startswith(PICKLE_PROTOCOL_MARK):
        raise InputError(
            f"checkpoint {path} is a raw Python pickle, not a Rerank Lab checkpoint (a torch archive); "
            "refused, nothing in it was loaded or run"
        )
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "GLOBAL" in str(exc):  # the weights-only unpickler met a class or function reference
            raise InputError(
                f"checkpoint {path} was refused: it holds Python objects other than tensors and plain data "
                "(a file from elsewhere, or made to run code); nothing in it was loaded or run"
            ) from None
        raise InputError(f"checkpoint {path} is corrupt or not a Rerank Lab checkpoint (unreadable pickle)") from None
    except Exception as exc:  # torch and zipfile raise many types for a damaged file
        raise InputError(f"checkpoint {path} is corrupt or not a Rerank Lab checkpoint ({type(exc).__name__})") from None


def _check_registered_model(path: Path, payload: dict[str, Any], registration: Registration) -> None:
    """``InputError`` unless the checkpoint holds the model, and version, the store registered."""
    kind, name = payload["kind"], payload.get("name", payload["kind"])
    if (kind, name) != (registration.kind, registration.name):
        raise InputError(
            f"checkpoint {path} holds model {name!r} (a {kind!r} model), but the store registered it as "
            f"{registration.describe()}; refused, nothing in it was loaded"
        )
    # Without a hash (a file that came after its registration) the id it holds is what binds it.
    stamped = payload.get("version_id")
    if registration.sha256 is None and stamped is not None and stamped != registration.version_id:
        raise InputError(
            f"checkpoint {path} is version id {stamped} of model {name!r}, but the store registered it as "
            f"{registration.describe()}; refused, nothing in it was loaded"
        )


def rebuild(path: str | Path, kind: str, from_state: Callable[[dict[str, Any]], T], state: dict[str, Any]) -> T:
    """``from_state(state)``, with a state that does not fit the model's current code (a field
    missing or unknown, tensors of another shape, wrong types) turned into ``InputError``, so a
    caller falls back to another version as it does for a damaged file."""
    try:
        return from_state(state)
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as exc:
        detail = " ".join(str(exc).split())
        detail = f"{type(exc).__name__}: {detail[:200]}{'…' if len(detail) > 200 else ''}"
        raise InputError(
            f"checkpoint {path} does not fit this version's {kind!r} model ({detail}); retrain it or use another version"
        ) from None


# ---------------------------------------------------------------------- names and clean-up

# <labels>.<store id>.<random>.pt: labels are slugs of model, dataset etc. (for people), the
# store id says whose file it is (stores sharing a data folder), the random part makes it unique.
_NAME = re.compile(r"^(?P<labels>[A-Za-z0-9_-]+)\.(?:(?P<owner>[0-9a-f]{12})\.)?(?P<token>[0-9a-f]{12})\.pt$")
_TEMPORARY = re.compile(r"^\..+\.tmp$")  # ``atomic_file``'s temporaries: .<name>.<random>.tmp
GC_GRACE_MINUTES = 60.0
GC_MIN_GRACE_MINUTES = 1  # a checkpoint's write takes seconds: a temporary file this young may be one being written


def slug(text: str, limit: int = 40) -> str:
    """A file-name-safe form of a user-given name: letters, digits, ``_`` and ``-`` only."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_-")[:limit] or "x"


def new_checkpoint_path(*labels: str, owner: str | None = None) -> Path:
    """A new, unique checkpoint file name in ``data/models``: ``labels`` (model, dataset, ...)
    sanitised, ``owner`` the writing store's ``store_id``. Never outside the data folder."""
    if owner is not None and not re.fullmatch(r"[0-9a-f]{12}", owner):
        raise ValueError(f"a store id is 12 hexadecimal digits, got {owner!r}")
    parts = ["-".join(slug(label) for label in labels) or "model", *([owner] if owner else []), uuid.uuid4().hex[:12]]
    return config.inside_data_dir(config.checkpoint_dir() / (".".join(parts) + ".pt"))


@dataclass
class CleanUp:
    """What ``collect_garbage`` deleted (or, dry, would delete) and what it kept, and why."""

    deleted: list[Path] = field(default_factory=list)
    freed_bytes: int = 0
    registered: int = 0  # checkpoints this store's registry uses: never touched
    recent: list[Path] = field(default_factory=list)  # younger than the grace period
    not_ours: list[Path] = field(default_factory=list)  # marked by another store
    unmarked: list[Path] = field(default_factory=list)  # no store mark (older names); kept unless asked


def collect_garbage(
    folder: Path,
    *,
    owner: str,
    registered: set[Path],
    grace_minutes: float = GC_GRACE_MINUTES,
    include_unmarked: bool = False,
    dry_run: bool = False,
) -> CleanUp:
    """Delete what killed or failed trainings left in ``folder``.

    The rule (other stores may share the folder):
    - a temporary file of ``atomic_file`` (``.NAME.RANDOM.tmp``) older than the grace period:
      its writer died (a write takes seconds), whichever store it was;
    - a ``.pt`` file marked with ``owner`` (this store) that no version of this store registers,
      older than the grace period (a finishing training registers its file only after evaluating it
      on TEST, minutes on a CPU for a large split: the default hour outlasts that, a short period may not);
    - with ``include_unmarked``, also unregistered ``.pt`` files without any store mark (names from
      before marks existed), older than the grace period: only safe when no other store uses the
      folder, since they may be its registered models.
    Never: a file this store registers, or one marked by another store.

    ``grace_minutes`` below ``GC_MIN_GRACE_MINUTES`` or not finite is refused (``InputError``): NaN,
    0 or a negative period would count a running training's temporary file as stale and delete it.
    """
    if not math.isfinite(grace_minutes) or grace_minutes < GC_MIN_GRACE_MINUTES:
        raise InputError(f"the grace period is a number of minutes, {GC_MIN_GRACE_MINUTES} or more (a younger file "
                         f"may be one a running training is writing); got {grace_minutes}")
    report = CleanUp()
    cutoff = time.time() - grace_minutes * 60
    keep = {path.resolve() for path in registered}
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not path.is_file():
            continue
        if path.suffix == ".pt" and not _TEMPORARY.match(path.name):
            if path.resolve() in keep:
                report.registered += 1
                continue
            name = _NAME.match(path.name)
            mark = name["owner"] if name else None
            if mark is not None and mark != owner:
                report.not_ours.append(path)
                continue
            if mark is None and not include_unmarked:
                report.unmarked.append(path)
                continue
        elif not _TEMPORARY.match(path.name):
            continue
        stat = path.stat()
        if stat.st_mtime > cutoff:
            report.recent.append(path)
            continue
        report.deleted.append(path)
        report.freed_bytes += stat.st_size
        if not dry_run:
            path.unlink(missing_ok=True)
    return report
