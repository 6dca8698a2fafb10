"""What ``qa_core/cli.py`` still imports from the dissolved workbench module (issue 35): the store
and demo data are ``store_setup``, models and their versions ``model_loading``, questions and
candidates ``candidate_pools``. Kept only until the CLI's split (a parallel change of issue 35) imports
those modules itself; then this file goes.
"""

from qa_core.services.candidate_pools import candidates_for_question, check_question
from qa_core.services.model_loading import load_ranker, looks_like_path, train_command
from qa_core.services.store_setup import ensure_demo, masked_url

__all__ = [
    "candidates_for_question",
    "check_question",
    "ensure_demo",
    "load_ranker",
    "looks_like_path",
    "masked_url",
    "train_command",
]
