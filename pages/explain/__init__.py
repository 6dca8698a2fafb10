"""Explanation views of issue 38 (explainer picker, contrastive view), apart from the pages that
issue 35 restructures; the pages call them in a line each."""
