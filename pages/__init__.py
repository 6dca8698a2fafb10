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

import ast
import functools
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy.exc import SQLAlchemyError
from streamlit.errors import StreamlitSecretNotFoundError

from db.store import Store
from pages.explain.picker import pick_explainer
from qa_core import config
from qa_core.access import LOCAL, Actor, Permission, plain_http_refusal
from qa_core.evaluation import Run
from qa_core.rankers.base import Explanation, Ranker
from qa_core.services import audit, experiments, ranking, text_views, trust, viz, workbench
from qa_core.services.evaluation_labels import DESCRIPTIONS, LabelRule
from qa_core.types import Candidate, InputError, NotTrainedError, Question

PAGES_DIR = Path(__file__).resolve().parent
TYPED, PICKED = "Type a question", "Pick a dataset question"
MODELS_KEPT = 6  # loaded (model version, dataset) pairs the server keeps; older ones are dropped
DATASETS_KEPT = 2  # loaded dataset imports the server keeps (WikiQA's is ~100 MB of Python objects)
RUNS_KEPT = 32  # whole-split runs the server keeps, per (model version, dataset import, split)
NO_DATASETS = "No datasets in the store. Import one with `python -m qa_core data import PATH --name NAME`."
ACTOR, SIGNED_IN_TOKEN = "signed_in_actor", "signed_in_token"
# What a role needs to open a page (the others need Permission.VIEW); the landing page lists only these.
PAGE_PERMISSIONS = {"4_Train.py": Permission.TRAIN, "6_Audit.py": Permission.VIEW_AUDIT}
STREAMLIT_JS = Path(st.__file__).resolve().parent / "static" / "static" / "js"  # its bundle
ASSETS = PAGES_DIR / "assets"  # our own scripts, run in the page


def page_files(actor: Actor = LOCAL) -> list[Path]:
    """The pages ``actor`` may open, in sidebar order."""
    return [
        path for path in sorted(PAGES_DIR.glob("[0-9]*.py"))
        if actor.may(PAGE_PERMISSIONS.get(path.name, Permission.VIEW))
    ]


def page_summaries(actor: Actor = LOCAL) -> list[tuple[str, str]]:
    """(path, first sentence of its docstring) of every page ``actor`` may open, in sidebar order:
    the landing page's links, so that adding a page means adding its file."""
    return [(f"pages/{path.name}", _summary(path, path.stat().st_mtime_ns)) for path in page_files(actor)]


@functools.cache
def _summary(path: Path, modified_ns: int) -> str:
    """The first sentence of a page's docstring, parsed once per version of the file: the entry point
    asks on every rerun, and parsing every page took ~70 ms of each click on the 2-core machine."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or path.stem
    first = " ".join(doc.split("\n\n")[0].split())
    return first.split(". ")[0].rstrip(".")


@st.cache_resource(show_spinner="Opening the store…")
def get_store(url: str, team: bool = False) -> Store:
    """One store per URL (and mode) for the whole server; the demo corpus is imported into an empty one."""
    store = workbench.open_store(url, team=team)
    workbench.ensure_demo(store)
    return store


@st.cache_resource(show_spinner="Loading the model…", max_entries=MODELS_KEPT)
def get_ranker(_store, url: str, model: str, dataset: str, model_version: str | None, dataset_version: str):
    """Rankers are shared by all sessions; a new model version or a re-import loads a new one."""
    return workbench.load_ranker(_store, model, dataset)


def load_ranker(store: Store, url: str, model: str, dataset: str) -> Ranker:
    """``model``'s current version for ``dataset``, through ``get_ranker``'s cache."""
    return get_ranker(
        store, url, model, dataset, workbench.model_version_key(store, model, dataset),
        workbench.dataset_version(store, dataset),
    )


def current_ranker(store: Store, url: str, model: str, dataset: str) -> Ranker | None:
    """``load_ranker``, or ``None`` after the page says why the model cannot be loaded."""
    try:
        return load_ranker(store, url, model, dataset)
    except NotTrainedError as error:
        show_not_trained(error, model, dataset)
    except InputError as error:
        st.error(workbench.as_markdown(str(error)))
    return None


def show_not_trained(error: NotTrainedError, model: str, dataset: str) -> None:
    """The error and the command that trains the model."""
    st.info(workbench.as_markdown(str(error)))
    st.code(workbench.train_command(model, dataset), language="bash")


@st.cache_resource(show_spinner="Loading the dataset…", max_entries=DATASETS_KEPT)
def get_questions(_store, url: str, dataset: str, dataset_version: str):
    return workbench.dataset_questions(_store, dataset)


@st.cache_resource
def _split_runs() -> OrderedDict:
    """The server's whole-split runs, newest last (a plain LRU: ``st.cache_data`` would replay the
    progress bar instead of showing it)."""
    return OrderedDict()


def split_run(store: Store, url: str, ranker: Ranker, model: str, dataset: str, split: str,
              questions: Sequence[Question]) -> Run:
    """``model``'s run over ``questions`` (a whole split), computed once per (model version, dataset
    import, split) for the whole server, with a progress bar while it is scored."""
    key = (url, model, workbench.model_version_key(store, model, dataset), dataset,
           workbench.dataset_version(store, dataset), split)
    runs = _split_runs()
    if key in runs:
        runs.move_to_end(key)
        return runs[key]
    bar = st.progress(0.0, text=f"Scoring {model} on {split}…")

    def progress(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=f"Scoring {model} on {split}: {done:,} of {total:,} questions")

    run = experiments.score_questions(ranker, questions, progress)
    bar.empty()
    runs[key] = run
    while len(runs) > RUNS_KEPT:
        runs.popitem(last=False)
    return run


def blank_missing(values: Sequence[Any], fmt: str = "{}") -> list[str]:
    """A column's values as text, a missing one as a blank cell: Streamlit writes "None" for a missing
    number whatever the column's format. For columns that still sort right as text (grades, decimals
    in [0, 1])."""
    return ["" if pd.isna(value) else fmt.format(value) for value in values]


def pick_label_rule(container, key: str) -> LabelRule:
    """The labels a page's metrics are computed against (default gold), with the rule spelled out."""
    rule = container.radio("Labels", list(LabelRule), key=key, horizontal=True,
                           format_func=lambda r: {LabelRule.GOLD: "gold", LabelRule.TRAINING: "training-label rule"}[r],
                           help=" ".join(f"{r.value}: {text}." for r, text in DESCRIPTIONS.items()))
    return LabelRule(rule)


def streamlit_modules(elements: Sequence[str]) -> list[str]:
    """The file names of the code of Streamlit's ``elements`` in the installed Streamlit's bundle
    (named by element type and a content hash, so looked up, never written down)."""
    return [path.name for element in elements for path in sorted(STREAMLIT_JS.glob(f"{element}.*.js"))]


def preload_elements(*elements: str) -> None:
    """Fetch the code of Streamlit's ``elements`` (its element type names: "Button", "DataFrame",
    ...) that the page draws next, so that they are drawn at once when they come.

    Streamlit fetches each element type's code the first time one is drawn in a browser tab (React's
    lazy loading): a fresh tab's first ranked table waited 1.5 s for the table's and plotly's code
    (issue 16), and the first pair's grade buttons came after the pair (issue 21; a key pressed
    meanwhile waits for its button, ``assets/label_keys.js``). Streamlit has no setting for it, so ``assets/preload.js`` imports
    those very modules, resolved beside Streamlit's own entry script, and the first element drawn
    finds its code loaded. The fetch starts once the page has been drawn and stood still, so it never
    holds up the page's own elements. Drawn in the sidebar, where it takes no room."""
    run_script(st.sidebar, "preload.js", "rerankLabPreload", streamlit_modules(elements))


def run_script(container, script: str, setting: str, value: Any) -> None:
    """Our own script ``assets/<script>`` run in the page, after ``window.<setting>`` is set to
    ``value`` (JSON: what this run tells the script; no data text goes into a script)."""
    container.html(
        f"<script>window.{setting} = {json.dumps(value)};</script>"
        f"<script>{(ASSETS / script).read_text(encoding='utf-8')}</script>",
        unsafe_allow_javascript=True,
    )


def open_store(show_device: bool = True, need: Permission = Permission.VIEW) -> tuple[str, Store]:
    """The configured store once the sign-in gate let the user through with the right to ``need``
    (``current_actor()`` is who that is), or a message on the page and a stop (never a traceback)."""
    url = config.database_url()
    team = team_mode()
    try:
        store = get_store(url, team)
    except (InputError, SQLAlchemyError) as error:
        st.error(workbench.as_markdown(f"Cannot open the store at {workbench.masked_url(url)}: {error}"))
        st.stop()
        raise  # st.stop() raises; this line only tells type checkers so
    if team:
        _team_serving_guard()
    actor = _with_identity_in_sidebar(store, _signed_in(store)) if team else LOCAL
    if not actor.may(need):
        st.warning(workbench.as_markdown(f"{actor.describe()} may not {need.value} here; ask an admin for the role."))
        st.stop()
    st.session_state[ACTOR] = actor
    if show_device:
        st.caption(f"Running on: {workbench.device_label()}")
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
        st.error(workbench.as_markdown(refusal))
        st.stop()


def _providers() -> list[str | None]:
    """The named providers (``[auth.NAME]`` sections), else the one unnamed provider (``None``)."""
    settings = auth_settings() or {}
    return [name for name, value in settings.items() if isinstance(value, Mapping) and "client_id" in value] or [None]


def _sign_in_screen(message: str, refused: bool = False) -> None:
    """A sign-in button per provider under ``message``, and nothing else: the page stops."""
    st.title("Rerank Lab")
    (st.error if refused else st.info)(workbench.as_markdown(message))
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
            actor = store.user_actor(known)
        else:  # a new sign-in in this browser session: the store records it (and the first user's admin role)
            actor = audit.sign_in(store, claims)
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
    who = workbench.as_markdown(name or actor.name)
    st.sidebar.markdown(f"Signed in as **{who}** ({workbench.as_markdown(actor.name)}) · {actor.role}")
    if st.sidebar.button("Sign out", key="sign_out"):
        try:
            store.sign_out(actor)
        except InputError as error:  # this browser still signs out; copies of its cookie are not ended
            st.sidebar.error(workbench.as_markdown(f"The store could not record the sign-out: {error}"))
        st.session_state.pop(SIGNED_IN_TOKEN, None)
        st.session_state.pop(ACTOR, None)
        st.logout()
        st.stop()
    return actor


LAST_DATASET, LAST_MODEL, LAST_CLEAN = "last_dataset", "last_model", "last_clean"


def pick_dataset(container, datasets: Sequence[str], key: str, store: Store | None = None) -> str:
    """The dataset select box of a page, starting on the dataset last used: on any page of this
    session (pages keep their own widget keys, which Streamlit forgets on leaving the page), else,
    in a fresh tab, the one a model was last trained on or promoted for (docs/architecture.md,
    "What a page shows")."""
    if key not in st.session_state:
        remembered = st.session_state.get(LAST_DATASET)
        if remembered not in datasets and store is not None:
            remembered = workbench.last_used_dataset(store, datasets)
        if remembered in datasets:
            st.session_state[key] = remembered
    dataset = container.selectbox("Dataset", datasets, key=key)
    st.session_state[LAST_DATASET] = dataset
    return dataset


def pick_model(container, store: Store, dataset: str, key: str, options: Sequence[str] | None = None) -> str:
    """A page's model select box over ``options`` (default: every model, those ready for ``dataset``
    first). It starts on the model last used for ``dataset`` (this session's, else the store's last
    trained or promoted) and goes there again when the dataset changes, so another dataset's choice
    never carries over; the version in use is said under it."""
    options = list(options) if options is not None else workbench.model_names(store, dataset)
    for_dataset = f"{key}__dataset"
    if st.session_state.get(key) not in options or st.session_state.get(for_dataset) != dataset:
        remembered = st.session_state.get(LAST_MODEL)
        st.session_state[key] = (remembered[1] if remembered and remembered[0] == dataset and remembered[1] in options
                                 else workbench.default_model(store, options, dataset))
        st.session_state[for_dataset] = dataset
    model = container.selectbox("Model", options, key=key)
    st.session_state[LAST_MODEL] = (dataset, model)
    container.caption(workbench.as_markdown(workbench.version_in_use(store, model, dataset)))
    return model


def preset_model(key: str, dataset: str | None, model: str) -> None:
    """Choose ``model`` in ``pick_model``'s box ``key`` for ``dataset`` before it is drawn (a link)."""
    st.session_state[key] = model
    st.session_state[f"{key}__dataset"] = dataset


CLEAN_LABEL = "Clean questions only"
CLEAN_HELP = ("Only questions with a correct and a wrong candidate: the WikiQA/TrecQA \"clean\" convention, "
              "as `--clean` on the command line. Off (the default), every question with labels counts, and one "
              "without a correct candidate scores 0.")


def pick_clean(container, key: str) -> bool:
    """The question set every metric of a page is computed over: every question with labels (the
    default, as the CLI's ``evaluate`` and trec_eval) or the clean ones. One control with one
    default on every page, and the choice carries over between pages, so the same model and split
    give the same number on Compare, Errors and the command line."""
    if key not in st.session_state:
        st.session_state[key] = st.session_state.get(LAST_CLEAN, False)
    clean = container.toggle(CLEAN_LABEL, key=key, help=CLEAN_HELP)
    st.session_state[LAST_CLEAN] = clean
    return clean


def question_set(clean: bool, questions: int, split: str) -> str:
    """The question set a number was computed over, said beside it."""
    return f"{questions} {'clean ' if clean else ''}questions ({split}{'' if clean else ', clean off'})"


def require_datasets(store: Store) -> list[str]:
    """The store's dataset names; an empty store says how to import one and stops the page."""
    datasets = store.dataset_names()
    if not datasets:
        st.info(NO_DATASETS)
        st.stop()
    return datasets


ChosenQuestion = tuple[str, Sequence[Candidate], str | None]


def question_input(store: Store, url: str, dataset: str, dataset_version: str) -> Callable[[], ChosenQuestion]:
    """The typed-or-picked question widgets (keys ``source``, ``question``, ``k``, ``picked``). The
    returned function, called when the page's button is clicked, gives the checked question, its
    candidates (BM25's top k, or the dataset question's own pool) and its qid (``None`` when typed);
    it raises ``InputError`` on a bad question."""
    source = st.radio("Question", [TYPED, PICKED], horizontal=True, key="source", label_visibility="collapsed")
    if source == TYPED:
        typed = st.text_input("Your question", key="question", placeholder="e.g. who discovered penicillin")
        k = int(
            st.number_input(
                "BM25 candidates to rerank", min_value=1, max_value=1000, value=workbench.DEFAULT_CANDIDATES, key="k"
            )
        )

        def chosen() -> ChosenQuestion:
            question = workbench.check_question(typed)
            return question, workbench.candidates_for_question(store, dataset, question, k=k), None

        return chosen
    questions = get_questions(store, url, dataset, dataset_version)
    picked = st.selectbox(
        "Dataset question",
        range(len(questions)),
        format_func=lambda i: f"{questions[i].qid} [{questions[i].split}] {questions[i].text}",
        key="picked",
    )

    def chosen() -> ChosenQuestion:
        if picked is None:
            raise InputError(f"dataset {dataset!r} has no questions to pick")
        return questions[picked].text, questions[picked].candidates, questions[picked].qid

    return chosen


# ------------------------------------------------------------- one candidate explained (Ask, Compare)


def explain_candidate(result: ranking.Ranking, rank: int, dataset: str, key: str) -> None:
    """Everything the app shows of why ``result``'s candidate at ``rank`` scored as it did, computed
    when opened: the model's word weights and matrices, how far to trust them, its REL links as
    arcs, its trees, and a counterfactual edit."""
    explainer = pick_explainer(result, key)
    with st.spinner("Explaining…"):
        explanation = result.explain(rank, explainer)
    show_explanation(explanation, key)
    show_trust(result, rank, dataset, explainer)
    show_arcs(explanation, key)
    if explanation.trees and st.toggle("Show the REL-tagged trees (as the model compared them)", key=f"{key}-trees"):
        for name, tree in explanation.trees.items():
            st.caption(workbench.as_markdown(name))
            st.code(viz.indented_tree(tree), language=None)
    show_counterfactual(result, rank, key)


def show_explanation(explanation: Explanation, key: str) -> None:
    """The model's word weights as highlighted text (the question's too, where the model weighs its
    words) and its word x word matrices."""
    for text in text_views.explanation_texts(explanation):
        st.html(text)
    for name in explanation.matrices:
        st.plotly_chart(viz.heatmap_figure(explanation, name), key=f"{key}-matrix-{name}")


def show_arcs(explanation: Explanation, key: str) -> None:
    """The explanation's REL links as arcs; past ``text_views.LINKS_SHOWN`` links the strongest,
    with a toggle for all of them."""
    figure = st.container()
    links = explanation.links
    show_all = len(links) > text_views.LINKS_SHOWN and st.toggle(f"Show all {len(links)} links", key=f"{key}-all-links")
    figure.markdown(text_views.arcs_html(explanation.question_tokens, explanation.answer_tokens, links,
                                         explanation.answer_weights, show_all=show_all), unsafe_allow_html=True)


def show_counterfactual(result: ranking.Ranking, rank: int, key: str) -> None:
    """Edit the candidate and score the edit against this ranking's scores; explain only the edit."""
    with st.form(f"{key}-form", border=False):
        edited = st.text_area(
            "Edit this candidate and score it again", value=result.at(rank).candidate.text, key=f"{key}-text"
        )
        submitted = st.form_submit_button("Score edited text")
    if submitted:
        try:
            st.session_state[f"{key}-result"] = result.counterfactual(rank, edited)
        except InputError as error:
            st.session_state.pop(f"{key}-result", None)
            st.error(workbench.as_markdown(str(error)))
    outcome = st.session_state.get(f"{key}-result")
    if outcome is not None:
        st.metric("Score of the edited text", f"{outcome.score:.4f}", delta=f"{outcome.delta:+.4f}")
        st.caption(f"Would rank #{outcome.rank} of {len(result)} (now #{rank}).")
        show_explanation(outcome.explanation, f"{key}-edited")


def show_trust(result: ranking.Ranking, rank: int, dataset: str, explainer: str | None = None) -> None:
    """How far to trust this heatmap: the model's measured faithfulness, and the same test live on
    this candidate (its score without its top-weighted words, and with only them, against random)."""
    measured = trust.measured_line(result.model, dataset, result.ranker.capabilities.trainable, explainer)
    if measured is not None:
        st.caption(workbench.as_markdown(measured))
    test = result.deletion_test(rank, explainer)
    k = ranking.LIVE_FRACTION
    st.caption(
        f"This candidate: score {test.score:.4f}; without its top {k:.0%} words "
        f"{test.score - test.comprehensiveness[k]:.4f} (without {k:.0%} random words: "
        f"{test.score - test.random_comprehensiveness[k]:.4f}); with only them "
        f"{test.score - test.sufficiency[k]:.4f} (only random words: {test.score - test.random_sufficiency[k]:.4f})."
    )
