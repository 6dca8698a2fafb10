"""The Streamlit pages (one file per page, numbered in sidebar order) and what they share, in
packages so that Streamlit does not list them as pages:

- ``common/``: ``signin`` (the store opened behind the team-mode sign-in gate, who acts),
  ``caches`` (the server's store, rankers, datasets and runs), ``pickers`` (dataset, model,
  question and label-rule choices remembered across pages), ``navigation`` (the pages a role may
  open), ``scripts`` (our scripts in the page, element preloading);
- ``render/``: ``markdown`` (the one escaping of data text), ``explanation`` (a candidate
  explained), ``links`` (addresses between pages);
- ``judging/`` (grade buttons and keys) and ``label/`` (the Label page's views).
"""
