"""Systems: bring a ranker built elsewhere, as a stored run (upload a TREC or JSONL run) or a live
scoring service (its URL), and it is listed as system:<name> wherever models are.

Widgets and layout only: the rules are ``qa_core.services.systems`` (the run contract, the service
contract, provenance; in team mode the store lets only admins add or remove a system, and the page
shows the forms only to a role that may use them). An uploaded file's name suggests the run's name
(``qa_core.names``) and is never used as a path. Data text is shown through ``st.dataframe`` or
escaped markdown.
"""

from __future__ import annotations

import streamlit as st

from pages.common.pickers import require_datasets
from pages.common.scripts import preload_elements
from pages.common.signin import current_actor, open_store
from pages.render.markdown import as_markdown
from qa_core.access import Permission
from qa_core.names import name_from_file
from qa_core.services import systems
from qa_core.types import InputError

NOTICE = "systems_notice"
RUN_NAME, NAMED_FOR = "systems_run_name", "systems_run_named_for"

st.set_page_config(page_title="Systems · Rerank Lab", layout="wide")

st.title("Systems")
url, store = open_store(show_device=False)
actor = current_actor()
names = require_datasets(store)
st.caption("A system ranks like a model: it appears as system:<name> on Ask, Compare, Errors and Label. "
           "A run ranks its dataset's questions; a service scores any question (README: Scoring services).")

notice_slot = st.empty()  # always drawn: the tabs below keep their place, so the open tab stays open
notice = st.session_state.pop(NOTICE, None)
if notice:
    notice_slot.success(as_markdown(notice))


def added(action) -> None:
    """Run ``action`` (an add or a remove) and say what happened; a refusal is one message."""
    try:
        st.session_state[NOTICE] = action()
    except InputError as error:
        st.error(as_markdown(str(error)))
        return
    st.rerun()


listed = systems.overview(store)
if actor.may(Permission.MANAGE_SYSTEMS):
    run_tab, service_tab, remove_tab = st.tabs(["Add a run", "Add a service", "Remove"])
    with run_tab:
        dataset = run_tab.selectbox("Dataset the run ranks", names, key="systems_dataset")
        upload = run_tab.file_uploader("TREC run or JSONL {qid, doc_id, score}", key="systems_run_file")
        if upload is not None and st.session_state.get(NAMED_FOR) != upload.file_id:
            st.session_state[NAMED_FOR] = upload.file_id  # a new file suggests a name once; a typed one stays
            if not st.session_state.get(RUN_NAME):
                st.session_state[RUN_NAME] = name_from_file(upload.name)
        run_name = run_tab.text_input("Name", key=RUN_NAME)
        if run_tab.button("Add the run", type="primary", key="systems_add_run", disabled=upload is None or not run_name):

            def add_run() -> str:
                system = systems.add_run_upload(store, upload.getvalue(), upload.name, dataset, run_name, actor=actor)
                return f"Added {systems.listed_name(system['name'])}: {system['note']}."

            added(add_run)
    with service_tab:
        service_url = service_tab.text_input("Scoring URL (POST)", placeholder="http://127.0.0.1:8765/",
                                             key="systems_url")
        service_name = service_tab.text_input("Name", key="systems_service_name")
        if service_tab.button("Add the service", type="primary", key="systems_add_service",
                              disabled=not service_url or not service_name):

            def add_service() -> str:
                system = systems.add_service(store, service_url, service_name, actor=actor)
                return f"Added {systems.describe(store, system['name'])}."

            added(add_service)
    with remove_tab:
        gone = remove_tab.selectbox("System", [row["system"] for row in listed], key="systems_remove_name")
        if remove_tab.button("Remove (labels stay)", key="systems_remove", disabled=gone is None):

            def remove() -> str:
                systems.remove(store, gone, actor=actor)
                return f"Removed {gone}; no label was touched."

            added(remove)
else:
    st.caption(as_markdown(f"{actor.describe()}: adding and removing systems is for admins; every system is "
                           "listed below and ranks on the other pages."))

st.subheader("Systems in this store")
if listed:
    # Fits the 820 px column at 1280 px, every column in view; a run's SHA-256 is in its line on the
    # other pages and in `systems list`.
    widths = {"system": 130, "kind": 60, "dataset": 70, "source": 150, "version": 170, "added by": 90, "added": 140}
    st.dataframe(listed, hide_index=True, key="systems_table", column_order=list(widths),
                 column_config={name: st.column_config.TextColumn(name, width=width) for name, width in widths.items()})
else:
    st.info("No system yet: add a run or a service above, or `python -m qa_core systems add-run FILE --data D --name N`.")

runs = [row for row in listed if row["kind"] == systems.RUN]
if runs:
    st.subheader("A run's metrics: over the questions it ranks and over the whole split")
    left, right = st.columns(2)
    chosen = left.selectbox("Run", [row["system"] for row in runs], key="systems_metrics_run")
    questions = store.datasets.load_dataset(next(row["dataset"] for row in runs if row["system"] == chosen))
    try:  # a run another session removed meanwhile: one sentence
        coverage = systems.run_coverage(store, chosen, questions)
        split = right.selectbox("Split", coverage.splits(), key="systems_metrics_split")
        metrics = coverage.metrics(split)
    except InputError as error:
        st.info(as_markdown(str(error)))
    else:
        st.dataframe([{"questions": over, **values} for over, values in metrics.items()], hide_index=True,
                     key="systems_metrics")
        st.caption("Gold labels, over the judged questions (those with a gold label on a candidate); an uncovered "
                   "question counts 0 over the whole split, as trec_eval -c.")
preload_elements("DataFrame")
