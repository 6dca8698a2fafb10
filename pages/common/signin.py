"""What every page shares: one store per URL for the whole server, cached rankers and datasets, the
page header with its clear messages, and the sign-in gate. Streamlit does not list ``__init__.py``
as a page.

Local mode (no ``[auth]`` section in ``.streamlit/secrets.toml``): no sign-in, everyone is the local
user, as before teams existed. Team mode (an ``[auth]`` section, as Streamlit's ``st.login``
documents it): ``open_store`` shows nothing but a sign-in button until the identity provider has
signed the user in, then checks the user against the store on every run (known, not signed out
since, token not expired, the role the page needs) and puts "Signed in as ..." and "Sign out" in the
sidebar. Pages pass ``current_actor()`` to every write; the store checks it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st
from sqlalchemy.exc import SQLAlchemyError
from streamlit.errors import StreamlitSecretNotFoundError

from pages.common.caches import get_store
from pages.common.navigation import page_files, page_summaries
from pages.render.markdown import as_markdown
from qa_core import config
from qa_core.access import LOCAL, Actor, Permission, plain_http_refusal
from qa_core.services import store_setup, users
from qa_core.services.datasets import Store, database_refusal
from qa_core.types import InputError

ACTOR, SIGNED_IN_TOKEN = "signed_in_actor", "signed_in_token"


def open_store(show_device: bool = True, need: Permission = Permission.VIEW) -> tuple[str, Store]:
    """The configured store once the sign-in gate let the user through with the right to ``need``
    (``current_actor()`` is who that is), or a message on the page and a stop (never a traceback)."""
    url = config.database_url()
    team = team_mode()
    try:
        store = get_store(url, team)
    except InputError as error:  # store_setup.open_store's one sentence (the URL's password masked)
        st.error(as_markdown(str(error)))
        st.stop()
        raise  # st.stop() raises; this line only tells type checkers so
    except SQLAlchemyError as error:  # opened, then refused the first read
        st.error(as_markdown(f"cannot read the store at {store_setup.masked_url(url)}: {database_refusal(error)}"))
        st.stop()
        raise  # st.stop() raises; this line only tells type checkers so
    if team:
        _team_serving_guard()
    actor = _with_identity_in_sidebar(store, _signed_in(store)) if team else LOCAL
    if not actor.may(need):
        st.warning(as_markdown(f"{actor.describe()} may not {need.value} here; ask an admin for the role."))
        st.stop()
    st.session_state[ACTOR] = actor
    if show_device:
        st.caption(f"Running on: {store_setup.device_label()}")
    return url, store


def current_actor() -> Actor:
    """Who this run acts as: the user ``open_store`` let in (team mode), else the local user."""
    actor = st.session_state.get(ACTOR)
    return actor if isinstance(actor, Actor) else LOCAL


def auth_settings() -> Mapping[str, Any] | None:
    """The ``[auth]`` section of ``.streamlit/secrets.toml``: team mode when there is one."""
    try:
        section = st.secrets.get("auth")
    except (StreamlitSecretNotFoundError, FileNotFoundError):
        return None
    return section or None


def team_mode() -> bool:
    return auth_settings() is not None


def _team_serving_guard() -> None:
    """Team mode's serving rules: errors show no details (tracebacks name files and data), and no
    sign-in over plain HTTP from the network unless the operator said so (``plain_http_refusal``):
    the page stops with the reason."""
    st.set_option("client.showErrorDetails", "none")
    refusal = plain_http_refusal(st.get_option("server.address"), (auth_settings() or {}).get("redirect_uri"),
                                 config.allow_plain_http())
    if refusal is not None:
        _no_pages_listed()
        st.error(as_markdown(refusal))
        st.stop()


def _providers() -> list[str | None]:
    """The named providers (``[auth.NAME]`` sections), else the one unnamed provider (``None``)."""
    settings = auth_settings() or {}
    return [name for name, value in settings.items() if isinstance(value, Mapping) and "client_id" in value] or [None]


def _sign_in_screen(message: str, refused: bool = False) -> None:
    """A sign-in button per provider under ``message``, and nothing else: the page stops."""
    _no_pages_listed()  # before the button: declared after ``st.login`` it kept the provider's page from opening
    st.title("Rerank Lab")
    (st.error if refused else st.info)(as_markdown(message))
    for provider in _providers():
        label = "Sign in" if provider is None else f"Sign in with {provider}"
        if st.button(label, key=f"sign_in_{provider or 'default'}", type="primary"):
            st.login(provider)
    st.stop()


def navigable_pages() -> list[tuple[str, str]]:
    """The pages the user may open (``page_summaries``), for the entry point's navigation: in team
    mode the sign-in screen and a stop until signed in. Draws nothing else (the page that runs next
    opens the store and draws the sidebar's identity)."""
    if not team_mode():
        return page_summaries(LOCAL)
    _team_serving_guard()
    try:
        store = get_store(config.database_url(), True)
    except (InputError, SQLAlchemyError):
        return []  # the landing page's open_store says why
    return page_summaries(_signed_in(store))


def _no_pages_listed() -> None:
    """Declare the pages with the navigation hidden, for a run that stops at the gate (the sign-in
    or plain-HTTP refusal screen): a run that never declares a navigation gets Streamlit's own, every
    file of ``pages/`` in the sidebar, to a visitor who may open none. Every page is declared, so a
    page's address opened before sign-in is no "page not found". Only where the run stops: a run the
    gate lets through declares ``app.py``'s navigation alone (declaring both lost the landing page's
    links in the browser)."""
    pages = [st.Page(path) for path in page_files(LOCAL)]  # absolute: a page run on its own (AppTest) has pages/ as its folder
    st.navigation([st.Page(_gate, title="Rerank Lab", default=True), *pages], position="hidden")


def _gate() -> None:
    """The landing page's place in the gate's navigation: never run (the gate stops first)."""


def _signed_in(store: Store) -> Actor:
    """The signed-in user, checked against the store (see the module docstring); otherwise the
    sign-in screen."""
    if not st.user.get("is_logged_in", False):
        _sign_in_screen("Sign in to use Rerank Lab: this workbench is shared by a team.")
    claims = st.user.to_dict()
    token = (claims.get("iss"), claims.get("sub"), claims.get("iat"))
    known = st.session_state.get(ACTOR)
    try:
        if st.session_state.get(SIGNED_IN_TOKEN) == token and isinstance(known, Actor) and known.signed_in:
            actor = store.users.user_actor(known)  # still known, not signed out, token not expired; its role now
        else:  # a new sign-in in this browser session: the store records it (and the first user's admin role)
            actor = users.sign_in(store, claims)
            st.session_state[SIGNED_IN_TOKEN] = token
    except InputError as error:  # refused (AccessDenied), a token the store cannot keep, or the database
        st.session_state.pop(SIGNED_IN_TOKEN, None)
        st.session_state.pop(ACTOR, None)
        _sign_in_screen(str(error), refused=True)
        raise  # st.stop() raises; this line only tells type checkers so
    st.session_state[ACTOR] = actor  # the page that runs after the entry point knows the user
    return actor


def _with_identity_in_sidebar(store: Store, actor: Actor) -> Actor:
    """The signed-in user's name, role and sign-out button in the sidebar."""
    claims = st.user.to_dict()
    name = claims.get("name") if isinstance(claims.get("name"), str) else None
    who = as_markdown(name or actor.name)
    st.sidebar.markdown(f"Signed in as **{who}** ({as_markdown(actor.name)}) · {actor.role}")
    if st.sidebar.button("Sign out", key="sign_out"):
        try:
            users.sign_out(store, actor)
        except InputError as error:  # this browser still signs out; copies of its cookie are not ended
            st.sidebar.error(as_markdown(f"The store could not record the sign-out: {error}"))
        st.session_state.pop(SIGNED_IN_TOKEN, None)
        st.session_state.pop(ACTOR, None)
        st.logout()
        st.stop()
    return actor
