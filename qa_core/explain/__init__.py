"""Explanations of a ranker's score by more than one method (``explainers``), their measured
faithfulness per model and the default chosen on DEV (``defaults``)."""
