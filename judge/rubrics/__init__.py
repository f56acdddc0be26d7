"""The shipped rubrics (``mmie``) and run configs (``demo``, ``rubric6``), package data.

A package (this file) so that :func:`judge.core.rubric.shipped_dir` finds them through
``importlib.resources.files("judge.rubrics")`` wherever judge is installed, a wheel included.
"""
