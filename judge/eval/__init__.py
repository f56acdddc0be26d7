"""Agreement of scorers with humans: correlation statistics, bootstrap intervals, CLIPScore, reports."""
