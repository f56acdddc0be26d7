"""Agreement of scorers with humans: correlation statistics, bootstrap intervals, CLIPScore, reports.

* :mod:`judge.eval.stats`: point statistics (scipy, scikit-learn): correlations, MAE/MSE, kappa, within one
  point, pairwise ranking accuracy.
* :mod:`judge.eval.bootstrap`: the cluster bootstrap (questions resampled) and the paired comparison.
* :mod:`judge.eval.ceiling`: the human ceiling (leave one annotator out, Krippendorff's alpha).
* :mod:`judge.eval.matching`: human items, score files, and how they are matched and counted.
* :mod:`judge.eval.clipscore`: CLIPScore and RefCLIPScore for interleaved responses.
* :mod:`judge.eval.plots`: the figures.
* ``judge-report`` itself: :mod:`judge.eval.report` (inputs, plots, files; :func:`run_report`),
  :mod:`judge.eval.report_build` (the numbers of ``report.json``, typed in :mod:`judge.eval.report_data`),
  :mod:`judge.eval.report_agreement` and :mod:`judge.eval.report_bias` (the sections of ``report.md`` and
  ``report.html``), :mod:`judge.eval.document` (the Markdown/HTML document).

Nothing heavy is imported here: ``judge.eval.stats`` needs numpy only until a statistic is computed.
"""
