"""Audit: who imported, trained, promoted, rolled back, adjudicated or changed a role, and when (as
CSV too); the team's users and their roles.

Admins only in team mode. Widgets and layout only; the tables and role changes are
``qa_core.services.users``' (the store checks the role again and records the change). Data text is
shown through ``st.dataframe`` or escaped markdown, never as HTML.
"""

from __future__ import annotations

import streamlit as st

from pages.common.signin import current_actor, open_store
from pages.render.markdown import as_markdown
from qa_core.access import Permission, Role
from qa_core.services import users
from qa_core.types import InputError

NOTICE = "audit_notice"

st.set_page_config(page_title="Audit · Rerank Lab", layout="wide")

st.title("Audit")
url, store = open_store(show_device=False, need=Permission.VIEW_AUDIT)
actor = current_actor()

notice = st.session_state.pop(NOTICE, None)
if notice:
    st.success(as_markdown(notice))

st.subheader("Who did what, and when")
actions = st.multiselect(
    "Actions", list(users.AUDIT_ACTIONS), key="audit_actions", format_func=lambda a: f"{a}: {users.AUDIT_ACTIONS[a]}",
    placeholder="every action",
)
events = users.audit_table(store, actions or None)
if events.empty and actions:  # other actions may well be recorded: say it is the filter
    st.info(as_markdown(f"Nothing matches the chosen actions ({', '.join(actions)}): no such event is recorded. "
                        "Clear the filter to see every action."))
elif events.empty:
    st.info("Nothing recorded yet: imports, training, promotions, roll backs, adjudications and role changes appear here.")
else:
    st.dataframe(events, hide_index=True, key="audit_events")
st.download_button(
    "Download the audit trail (CSV)", users.audit_csv(events), file_name="rerank-lab-audit.csv", mime="text/csv", key="audit_csv"
)

st.subheader("Users and roles")
team = users.users_table(store)
if team.empty:
    st.info(
        "No one has signed in yet. Users appear at their first sign-in (team mode: an [auth] section in "
        ".streamlit/secrets.toml); the first one becomes admin."
    )
    st.stop()
st.dataframe(team, hide_index=True, key="audit_users")
left, right, button = st.columns([2, 1, 1], vertical_alignment="bottom")
who = left.selectbox("User", team["recorded as"].tolist(), key="audit_user")  # unique, unlike emails
role = right.selectbox("Role", list(Role), key="audit_role")
if button.button("Change the role", key="audit_grant", type="primary"):
    try:
        changed = users.grant_role(store, who, role, actor=actor)
    except InputError as error:
        st.error(as_markdown(str(error)))
    else:
        st.session_state[NOTICE] = f"{changed['recorded_as']} is now {changed['role']}."
        st.rerun()
