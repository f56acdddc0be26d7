"""``judge-view``: look at what a judge did, item by item, beside the human scores, the report and the audit.

:func:`load_view` reads a ``judge-score`` folder (and a report and an audit); :func:`export_site` writes it
as a static site; :func:`view_run` does what the command does (export, or serve on loopback).
"""

from judge.view.config import ViewConfig
from judge.view.load import ViewData, load_view
from judge.view.run import ViewResult, view_run
from judge.view.site import export_site, site_files

__all__ = ["ViewConfig", "ViewData", "ViewResult", "export_site", "load_view", "site_files", "view_run"]
