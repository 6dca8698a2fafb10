"""Opening the store the app, the CLI and a job process use (the one ``open_store``), with the
bundled demo corpus on a first run, and what a page's header says about where the app runs (the
store's URL without its password, the device).

No Streamlit here: the pages cache what these return.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from qa_core import config
from qa_core.types import InputError

if TYPE_CHECKING:  # imported where used: the CLI starts without loading the store
    from db.store import Store


def open_store(url: str | None = None, *, team: bool = False) -> Store:
    """The store at ``url``, else the configured one (``RERANK_LAB_DB`` or SQLite in the data
    folder); ``team``: writes need a signed-in user (``db/audit.py``). The one way the pages, the
    CLI and a job process open it: ``InputError`` saying in one sentence why it cannot be opened
    (an unreadable URL, an unreachable database), with any password in the URL masked."""
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from db.store import Store

    url = config.database_url() if url is None else url  # an empty URL is refused, not replaced
    try:
        return Store(url, team=team)
    except InputError as error:  # an unreadable URL: the message repeats none of it
        raise InputError(f"cannot open the store: {error}") from None
    except (ArgumentError, SQLAlchemyError) as error:
        reason = str(getattr(error, "orig", None) or error).splitlines()[0]
        raise InputError(f"cannot open the store at {masked_url(url)}: {reason}") from None


def ensure_demo(store: Store, *, beside_others: bool = False) -> bool:
    """Import the bundled demo corpus into an empty store, so a first run works offline; with
    ``beside_others`` (``data demo``, which ``make run`` calls) also into a store that holds other
    datasets but not the demo.

    Returns whether it imported. Two first runs racing each other are fine: the loser sees the
    winner's dataset. The app itself imports it (``SYSTEM`` in the audit trail), in team mode too.
    """
    from qa_core.access import SYSTEM
    from qa_core.data.demo import DEMO_NAME, load_demo

    names = store.datasets.dataset_names()
    if DEMO_NAME in names or (names and not beside_others):
        return False
    try:
        store.datasets.import_dataset(load_demo(), actor=SYSTEM)
    except InputError:
        if DEMO_NAME not in store.datasets.dataset_names():
            raise
        return False
    return True


def masked_url(url: str) -> str:
    """The database URL with any password hidden, safe to show on a page, in a message or a log.

    The password before the '@' is SQLAlchemy's ``***``, and so is the value of every query
    parameter: a driver takes secrets there under names of its own (libpq's ``password``,
    ``sslpassword``, ``passfile``; pyodbc's whole ``odbc_connect`` string), so the names are shown
    and no value is."""
    try:
        parsed = config.parse_database_url(url)
    except InputError:  # not parseable: show nothing that could be a secret
        return "(unparseable database URL)"
    shown = parsed.set(query={}).render_as_string(hide_password=True)
    if not parsed.query:
        return shown
    return f"{shown}?" + "&".join(f"{quote(key, safe='')}=***" for key in parsed.query)


def device_label() -> str:
    """Where neural rankers run (``RERANK_LAB_DEVICE``, else CUDA when torch sees it, else the CPU):
    ``GPU (<name>, <memory> GiB)`` or ``CPU``, with `` · mixed precision`` when ``RERANK_LAB_AMP`` is on."""
    from qa_core.device import amp_enabled, default_device, describe

    try:
        label = describe(default_device())
    except InputError as error:
        return str(error)
    return f"{label} · mixed precision" if amp_enabled() else label
