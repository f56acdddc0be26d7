"""Human annotations to training data: validation against the rubric, annotator aggregation and
agreement, question-level splits, and the rubric-conditioned SFT examples ``judge-train`` learns from.

Builds on :mod:`judge.core`; ``datasets`` is imported only where an SFT dataset is written or read.
"""
