"""Fixtures that stand in for real models and data, built locally and deterministically.

* :mod:`judge.testing.demo`: the synthetic demo set (images, questions, responses, simulated annotators);
* :mod:`judge.testing.tiny`: the tiny InternVL-class model and its tokenizer (``--judge tiny``);
* :mod:`judge.testing.tiny_clip`: a tiny random CLIP for the CLIPScore baseline (``--clip-model tiny``).

Nothing here is downloaded, and nothing here measures a real judge.
"""
