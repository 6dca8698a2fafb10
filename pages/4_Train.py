"""Train: retrain a model from the stored labels (plus gold if chosen), watch it, promote or roll back.

Widgets and layout only; the work is in ``qa_core.services.jobs`` (the training runs in its own process,
so the page never freezes), ``qa_core.services.retraining`` and ``qa_core.services.labeling``. Data text is shown
through ``st.dataframe`` or escaped markdown, never as HTML.
"""

from __future__ import annotations

import streamlit as st

from pages.common.pickers import pick_dataset, pick_model, require_datasets
from pages.common.signin import current_actor, open_store
from pages.render.markdown import as_markdown
from qa_core.access import Permission
from qa_core.rankers import registry
from qa_core.services import candidate_pools, jobs, model_loading, models, retraining, viz
from qa_core.types import InputError

JOB_KEY = "train_job"
ROLLED_BACK_KEY = "train_rolled_back"  # the roll back's toast, shown by the run after it
POLL_SECONDS = 1.0

st.set_page_config(page_title="Train · Rerank Lab", layout="wide")


st.title("Train")
url, store = open_store(need=Permission.TRAIN)  # admins only in team mode
actor = current_actor()
datasets = require_datasets(store)

left, middle, right = st.columns(3)
dataset = pick_dataset(middle, datasets, key="train_dataset", store=store)
model = pick_model(left, store, dataset, key="train_model", options=registry.trainable())
seed = int(right.number_input("Seed", min_value=0, value=1, step=1, key="train_seed"))
left, right = st.columns(2)
store_labels = left.checkbox("Use the labels collected in the store", value=True, key="train_store_labels")
gold_choice = right.radio(
    "Fill the gaps with the dataset's gold labels on",
    list(retraining.GOLD_CHOICES),
    key="train_gold",
    horizontal=True,
)
gold = retraining.GOLD_CHOICES[gold_choice]
settings = {
    name: int(
        st.number_input(
            retraining.SETTING_LABELS.get(name, name), min_value=1, max_value=1000, value=int(default), key=f"train_{name}_{model}"
        )
    )
    for name, default in retraining.training_settings(model).items()
}

preview = retraining.label_preview(store, dataset, store_labels, gold)
conflicts = retraining.conflicts_table(preview)
with st.expander("Which labels are used", expanded=not conflicts.empty):
    st.markdown(retraining.LABEL_RULE)
    if not store_labels:
        st.caption("Stored labels are not used: the dataset's gold labels only.")
    st.dataframe(retraining.sources_table(store, dataset, preview), hide_index=True)
    st.markdown(f"**Conflicts** (annotators disagree, no adjudication yet): {len(conflicts)}")
    if not conflicts.empty:
        # The texts at a medium width: at their own they pushed labels, used and gold (what the table is
        # for) out of view at 1280 px.
        st.dataframe(conflicts, hide_index=True,
                     column_config={name: st.column_config.TextColumn(width="medium") for name in ("question", "candidate")})

if st.button("Retrain", type="primary", key="train_start"):
    try:
        st.session_state[JOB_KEY] = jobs.start_training_job(
            store,
            model,
            dataset,
            store_labels=store_labels,
            gold=gold,
            seed=seed,
            model_config=settings,
            actor=actor,
        )
    except InputError as error:
        st.error(as_markdown(str(error)))


def show_job(job_id: int, was_active: bool) -> None:
    """Progress bar, live loss / dev-MAP curve and the outcome of the session's latest job."""
    status = retraining.job_status(store, job_id)
    if was_active and not status.active:
        st.rerun(scope="app")  # the job ended: stop polling and refresh the versions below
    job = status.job
    if status.failed:  # no bar: how far it got is in the sentence
        st.error(as_markdown(status.failure(store.models.promoted_model(job["model"], job["dataset"]))))
    else:
        st.progress(status.fraction, text=as_markdown(status.label))
    if not status.events.empty:
        st.plotly_chart(retraining.training_figure(status.events), key=f"job_curve_{job_id}")
    if job["status"] == "succeeded":
        version = store.models.model_version(job["model_version_id"])
        st.success(f"Job {job_id} finished: {job['model']} version {version['version']} registered (not promoted).")


@st.cache_data(show_spinner="Scoring DEV with both versions…", max_entries=32)
def version_check(_store, store_url: str, model: str, version: int, dataset: str, promoted_id: int | None,
                  dataset_version: str):
    """``retraining.check_against_promoted``, once per (store, version, promoted version, dataset
    version): scoring DEV with two checkpoints takes seconds. ``store_url`` keys the cache, so two
    stores served by one process never share a card."""
    return retraining.check_against_promoted(_store, model, version, dataset)


job_id = st.session_state.get(JOB_KEY)
if job_id is not None:
    st.subheader("Training")
    active = retraining.job_status(store, job_id).active
    st.fragment(run_every=POLL_SECONDS if active else None)(show_job)(job_id, active)
    if active and st.button("Cancel the training", key="train_cancel"):
        jobs.cancel_job(store, job_id, actor=actor)
        st.rerun()

st.subheader(f"Versions of {model}")
versions = retraining.versions_table(store, model)
if versions.empty:
    st.info("No version registered yet: retrain above.")
else:
    # The metrics before the longer texts: a long dataset name or a stored labels' count ("adjudicated 0,
    # labels 14, ...") pushed them out of view at 1280 px.
    st.dataframe(versions, hide_index=True, column_order=["version", "in use for", "dataset",
                                                          *retraining.METRIC_COLUMNS.values(), "train labels",
                                                          "labels", "created", "job"])
    st.caption(retraining.VERSION_METRICS_NOTE)
    numbers = versions["version"].tolist()
    in_use = store.models.promoted_model(model, dataset)
    left, middle, right = st.columns(3)  # the buttons' labels (which name a dataset) get a third each
    seen = st.session_state.get(f"train_versions_seen_{model}")  # (dataset, versions) when the box was last set
    if seen != (dataset, len(numbers)):  # first the version the dataset uses; after a training, the new one
        st.session_state[f"train_versions_seen_{model}"] = (dataset, len(numbers))
        st.session_state[f"train_version_{model}"] = retraining.version_to_open(
            versions, in_use, dataset, new=seen is not None and seen[0] == dataset)
    chosen = left.selectbox("Version", numbers, key=f"train_version_{model}")
    st.dataframe(retraining.comparison(store, model, int(chosen), dataset), hide_index=True,
                 column_config={"labels": st.column_config.TextColumn(width="medium")})  # not cut at 1280 px
    try:
        check = version_check(store, url, model, int(chosen), dataset, in_use["id"] if in_use else None,
                              candidate_pools.dataset_version(store, dataset))
        unchecked = None
    except InputError as error:  # a checkpoint missing or refused: said, and promoting needs a confirmation
        check = None
        unchecked = f"Version {chosen} was not compared with the promoted one on DEV: {error}"
        st.warning(as_markdown(unchecked))
    confirmed = False
    if unchecked is not None:
        confirmed = st.checkbox(f"Promote version {chosen} without the comparison on DEV",
                                key=f"train_confirm_{model}_{chosen}")
    if check is not None:
        with st.container(border=True):
            (st.warning if check.significantly_worse else st.info)(as_markdown(check.summary(dataset)))
            if not check.worse.empty:
                st.dataframe(check.worse, hide_index=True, key="train_worse")
            if check.significantly_worse:
                confirmed = st.checkbox(f"Promote version {chosen} although it is significantly worse on DEV",
                                        key=f"train_confirm_{model}_{chosen}")
    blocked = models.needs_confirmation(check, unchecked is None) and not confirmed
    already = in_use is not None and in_use["promoted"] and in_use["version"] == chosen
    reason = unchecked or f"Version {chosen} is significantly worse on DEV"
    unconfirmed = as_markdown(f"{reason}: confirm below first.") if blocked else None
    if middle.button(f"Promote for {as_markdown(dataset)}", key="train_promote", disabled=already or blocked,
                     help=unconfirmed):
        try:
            models.promote(store, model, int(chosen), dataset, actor=actor, check=check, compared=unchecked is None,
                           confirmed=confirmed)
            st.rerun()
        except InputError as error:  # e.g. the role was taken away meanwhile
            st.error(as_markdown(str(error)))
    target = store.models.rollback_target(model, dataset)
    # The dataset goes in the help: a button's label does not wrap, and a long name cut it off in its column.
    rollback_label = "Roll back" if target is None else f"Roll back to version {target['version']}"
    rollback_help = as_markdown(f"No earlier version was promoted for {dataset}." if target is None else
                                f"Promote version {target['version']} again for {dataset}: the one promoted "
                                "for it before the version in use.")
    if ROLLED_BACK_KEY in st.session_state:  # a toast sent just before st.rerun() never shows (Streamlit issue 7740)
        st.toast(st.session_state.pop(ROLLED_BACK_KEY))
    if right.button(rollback_label, key="train_rollback", disabled=target is None, help=rollback_help):
        try:
            back = models.rollback(store, model, dataset, target["version"], actor=actor)
            st.session_state[ROLLED_BACK_KEY] = f"Version {back['version']} promoted again for {as_markdown(dataset)}"
            st.rerun()
        except InputError as error:  # another session rolled back or promoted in between
            st.error(as_markdown(str(error)))
    st.caption(
        as_markdown(f"The pages use for {dataset}: {model_loading.version_in_use(store, model, dataset)}. "
                              "A version trained on another dataset is used for this one only once promoted here.")
    )

    curve = viz.version_curve_figure(versions, model)
    if curve is not None:
        st.plotly_chart(curve, key="train_version_curve")
