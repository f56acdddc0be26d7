"""Agreement of scorers with humans: correlation statistics, bootstrap intervals, CLIPScore, reports.

* :mod:`judge.eval.stats`: point statistics (scipy, scikit-learn): correlations, MAE/MSE, kappa, within one
  point, pairwise ranking accuracy.
* :mod:`judge.eval.bootstrap`: the cluster bootstrap (questions resampled) and the paired comparison.
* :mod:`judge.eval.ceiling`: the human ceiling (leave one annotator out, Krippendorff's alpha).
* :mod:`judge.eval.matching`: human items, score files, and how they are matched and counted.
* :mod:`judge.eval.clipscore`: CLIPScore and RefCLIPScore for interleaved responses.
* :mod:`judge.eval.plots`, :mod:`judge.eval.report`: the figures and ``judge-report`` itself (:func:`run_report`).

Nothing heavy is imported here: ``judge.eval.stats`` needs numpy only until a statistic is computed.
"""
