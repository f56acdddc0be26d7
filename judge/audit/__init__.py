"""``judge-audit``: does the judge see what humans see? Controlled changes to responses, scored with the
judge (and optionally CLIPScore), with intervals and verdicts. :func:`run_audit` runs one."""

from judge.audit.config import AuditConfig
from judge.audit.perturb import PERTURBATIONS, Perturbation
from judge.audit.report import AuditData
from judge.audit.run import AuditResult, run_audit

__all__ = ["PERTURBATIONS", "AuditConfig", "AuditData", "AuditResult", "Perturbation", "run_audit"]
