"""The verdict of a run: what its files say about the judge, in a few lines, read from the files the commands
wrote and nothing else (no figure here is computed anew, none is written in the code). The demo ends with it
(``scripts/demo.py``) and judge-view's first page opens with it; both call :func:`run_verdicts`.

Four verdicts, each a headline and the lines that support it:

* **Agreement** (``report.json``, the main slice): the judge's Spearman with the annotators beside the other
  scorers' and the annotators' own (leave one out: the ceiling), with the report's intervals, and the
  paired differences (same resamples) that say whether it agrees better, worse, or indistinguishably.
* **Audit** (``audit.json``): each perturbation's change of the judge's score and its verdict; a *blind*
  verdict (the annotators punish it, the judge's score does not move) is stated as a known limit.
* **Calibration** (the judge folder's ``calibration.json``, when it is the one the scores used, and the
  report's check on held-out items): the map chosen, and the cross-validated NLL it was chosen on.
* **Selective evaluation** (the judge folder's ``selective.json`` and the report's check): what was trusted
  and why (the threshold's test on the labelled items), or that no threshold passed, why, and what to do.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.core.errors import JudgeError
from judge.core.rubric import OVERALL
from judge.eval.selective import plan_advice

#: what an audit verdict means for the judge's user (judge.audit.report's table, in words)
AUDIT_MEANING = {
    "sensitive": "its score falls, as the annotators' does",
    "blind": "a known limit: the annotators punish it ({description}), the judge's score does not move: do "
    "not rely on this judge to catch it",
    "rewarded": "a flaw: its score rises where the annotators' falls",
    "steady": "its score does not move, as expected",
    "falls": "its score falls",
    "rises": "its score rises",
    "n/a": "too few pairs for a verdict",
}


@dataclass
class Verdict:
    topic: str
    headline: str
    details: list[str] = field(default_factory=list)


@dataclass
class RunFiles:
    """What a verdict reads: each file's content (None: not given or not found) and its path."""

    report: dict[str, Any] | None = None
    audit: dict[str, Any] | None = None
    calibration: dict[str, Any] | None = None
    selective: dict[str, Any] | None = None
    #: the fingerprints of the calibration and thresholds the scores were made with (run.json)
    used: dict[str, str | None] = field(default_factory=dict)
    scorer: str | None = None  #: the report's name for the judge (None: found from the score folder)
    score_dir: Path | None = None
    paths: list[str] = field(default_factory=list)  #: the files read, for the reader


def _json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise JudgeError(f"{path}: cannot read it as JSON ({e})") from None
    return data if isinstance(data, dict) else None


def read_run_files(
    *,
    score: str | Path | None = None,
    report: str | Path | None = None,
    audit: str | Path | None = None,
    judge: str | Path | None = None,
    scorer: str | None = None,
) -> RunFiles:
    """The files of a run, by the folders the commands wrote: ``score`` (judge-score's, whose ``run.json``
    names the judge folder when ``judge`` is not given), ``report``, ``audit`` and ``judge`` (the judge
    folder: ``calibration.json``, ``selective.json``). A folder not given, or a file not in it, is left out."""
    files = RunFiles(scorer=scorer, score_dir=Path(score) if score is not None else None)

    def read(path: Path) -> dict[str, Any] | None:
        data = _json(path)
        if data is not None:
            files.paths.append(str(path))
        return data

    if score is not None:
        run = _json(Path(score) / "run.json") or {}
        ident = run.get("identity") or {}
        files.used = {"calibration": ident.get("calibration"), "selective": ident.get("selective")}
        if judge is None:
            judge = ident.get("judge") or (run.get("options") or {}).get("judge")
    if report is not None:
        files.report = read(Path(report) / "report.json")
    if audit is not None:
        files.audit = read(Path(audit) / "audit.json")
    if judge is not None and Path(judge).is_dir():
        files.calibration = read(Path(judge) / "calibration.json")
        files.selective = read(Path(judge) / "selective.json")
    return files


# ----------------------------------------------------------------------------- formatting


def _iv(x: dict[str, Any] | None, digits: int = 3) -> str:
    """A value with its interval at the same decimals, as the report prints it: ``0.632 [0.541, 0.710]``."""
    if not x or x.get("value") is None:
        return "undefined"
    ci = x.get("ci")
    return f"{x['value']:.{digits}f}" + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _pct_iv(x: dict[str, Any] | None) -> str:
    if not x or x.get("value") is None:
        return "undefined"
    ci = x.get("ci")
    return _pct(x["value"]) + (f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "")


# ----------------------------------------------------------------------------- the verdicts


def judge_scorer(files: RunFiles) -> str | None:
    """The report's name for the run's judge: given, else the scorer whose file is the score folder's
    ``scores.jsonl``, else the first with a calibration check, else the first."""
    report = files.report or {}
    names = [s["name"] for s in report.get("scorers") or []]
    if files.scorer is not None:
        return files.scorer if files.scorer in names else None
    if files.score_dir is not None:
        mine = (files.score_dir / "scores.jsonl").resolve()
        for s in report.get("scorers") or []:
            if Path(s.get("file", "")).resolve() == mine:
                return str(s["name"])
    calibrated = [c["scorer"] for c in report.get("calibration") or []]
    return calibrated[0] if calibrated else names[0] if names else None


def _main_slice(report: dict[str, Any]) -> dict[str, Any] | None:
    return next((s for s in report.get("slices") or [] if s["key"] == report.get("main")), None)


def agreement_verdict(files: RunFiles, scorer: str) -> Verdict | None:
    report = files.report
    main = _main_slice(report) if report else None
    if report is None or main is None or scorer not in main["scorers"]:
        return None
    n_boot = (report.get("settings") or {}).get("bootstrap")
    ceiling = main["ceiling"]["loao"]["spearman"]
    mine = main["scorers"][scorer]["spearman"]
    details = [
        f"{main['title']}: {main['n_items']} items, {main['n_questions']} questions; Spearman with the annotators' "
        f"mean [95% interval from {n_boot} resamples of questions]:",
        f"  {'annotators (leave one out: the ceiling)':42s} {_iv(ceiling)}",
    ]
    for name, st in main["scorers"].items():
        rough = " (few items: rough)" if st.get("small_n") else ""
        details.append(f"  {name:42s} {_iv(st['spearman'])}{rough}")
    against = []
    for pc in report.get("paired") or []:
        if pc["slice"] != main["key"] or scorer not in (pc["a"], pc["b"]) or pc.get("spearman") is None:
            continue
        sp, flip = pc["spearman"], pc["b"] == scorer
        other = pc["a"] if flip else pc["b"]
        if sp.get("diff") is None or not sp.get("ci"):
            against.append((other, "undefined", "no interval"))
            continue
        diff = -sp["diff"] if flip else sp["diff"]
        lo, hi = sorted((-sp["ci"][0], -sp["ci"][1]) if flip else (sp["ci"][0], sp["ci"][1]))
        word = "better than" if lo > 0 else "worse than" if hi < 0 else "not distinguishable from"
        shown = f"{diff:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        against.append((other, word, shown))
        details.append(
            f"  {scorer} - {other}: {shown} (same resamples; {pc['n']} items, {pc['n_questions']} questions): "
            f"{scorer} agrees {word} {other}"
            + (" (the interval lies above 0)" if lo > 0 else " (the interval lies below 0)" if hi < 0 else
               " (the interval spans 0)")
        )  # fmt: skip
    share = ""
    ci = mine.get("ci")
    if mine.get("value") is not None and ceiling.get("value"):
        share = f", {mine['value'] / ceiling['value']:.0%} of the annotators' {ceiling['value']:.3f}"
        # A share of the ceiling only for an agreement shown: an interval reaching 0 shows none (and a
        # negative share would read as a measure of something).
        if ci and ci[0] <= 0:
            what = (
                "no agreement shown (the interval contains 0)"
                if ci[1] >= 0
                else "an inverse agreement (the interval lies below 0)"
            )
            share = f", {what}, against the ceiling of the annotators' {ceiling['value']:.3f}"
    words: dict[str, list[str]] = {}
    for other, word, shown in against:
        words.setdefault(word, []).append(f"{other} ({shown})" if word != "undefined" else other)
    said = "; ".join(f"{w} {', '.join(o)}" for w, o in words.items())
    headline = f"{scorer}: Spearman {_iv(mine)}{share}" + (f"; {said}" if said else "")
    return Verdict("Agreement", headline, details)


def audit_verdict(files: RunFiles) -> Verdict | None:
    audit = files.audit
    if audit is None or not audit.get("cells"):
        return None
    scorer = "judge" if "judge" in audit.get("scorers", []) else audit["scorers"][0]
    criteria = audit.get("criteria") or [OVERALL]
    crit = OVERALL if OVERALL in criteria else criteria[0]
    cells = {(c["scorer"], c["perturbation"], c["criterion"]): c for c in audit["cells"]}
    who = (audit.get("judge") or {}).get("source") or scorer
    details = [
        f"judge-audit of {who} on {audit['n_items']} responses ({audit['n_questions']} questions), the {crit} "
        "score's mean change [95% interval]:"
    ]
    by_verdict: dict[str, list[str]] = {}
    for p in audit.get("perturbations") or []:
        c = cells.get((scorer, p["name"], crit))
        if c is None:
            continue
        v = c["verdict"]
        change = "-" if c.get("change") is None else f"{c['change']:+.2f}"
        ci = f" [{c['ci'][0]:+.2f}, {c['ci'][1]:+.2f}]" if c.get("ci") else ""
        meaning = AUDIT_MEANING.get(v, v).format(description=p.get("description") or p["name"])
        details.append(f"  {p['name']:16s} {change}{ci}  {v}: {meaning}")
        by_verdict.setdefault(v, []).append(p["name"])
    parts = []
    for v, names in by_verdict.items():
        extra = " (a known limit)" if v == "blind" else " (a flaw)" if v == "rewarded" else ""
        parts.append(f"{v} to {', '.join(names)}{extra}")
    return Verdict("Audit", "; ".join(parts) or "no verdict on the criterion", details)


def _where(key: str) -> str:
    return "the pooled map (the criteria without their own)" if key == "*" else key


def _choice_key(choice: dict[str, Any], criterion: str) -> str | None:
    return criterion if criterion in choice else "*" if "*" in choice else next(iter(choice), None)


def _map_words(cal: dict[str, Any], key: str, method: str) -> str:
    part = cal.get("pooled") if key == "*" else (cal.get("criteria") or {}).get(key)
    if method == "temperature" and part and part.get("temperature") is not None:
        return f"a temperature (T = {part['temperature']:.3f})"
    if method == "isotonic":
        return "an isotonic map"
    if method == "none":
        return "the raw read-out (no map)"
    return method


def calibration_name(files: RunFiles, criterion: str = OVERALL) -> str | None:
    """The calibration the scores used, in words (``auto: the raw read-out (no map) for overall``), not its
    fingerprint; None when the scores are not calibrated."""
    cal = _used_calibration(files)
    if cal is None:
        check = next(iter((files.report or {}).get("calibration") or []), None)
        if not files.used.get("calibration") and check is None:
            return None
        method = check.get("method") if check else None
        return f"{method or 'calibrated'} (the map it chose is in the judge folder's calibration.json, not found)"
    choice = (cal.get("comparison") or {}).get("choice") or {}
    key = _choice_key(choice, criterion)
    if key is None:
        return str(cal.get("method"))
    chosen = str(choice[key].get("method"))
    return f"{cal.get('method')}: {_map_words(cal, key, chosen)} for {_where(key)}; {cal.get('level', 0):.0%} intervals"


def _used_calibration(files: RunFiles) -> dict[str, Any] | None:
    """The judge folder's calibration.json when it is the one the scores used (same fingerprint)."""
    cal = files.calibration
    if cal is None:
        return None
    used = files.used.get("calibration")
    if used is None:
        return cal
    from judge.models.calibration import Calibration

    try:
        mine = Calibration.model_validate(cal).fingerprint()
    except ValueError:
        return None
    return cal if mine == used else None


def calibration_verdict(files: RunFiles, scorer: str | None, criterion: str = OVERALL) -> Verdict | None:
    check = next((c for c in (files.report or {}).get("calibration") or [] if c["scorer"] == scorer), None)
    cal = _used_calibration(files)
    if cal is None and check is None and files.calibration is None:
        return None
    details: list[str] = []
    headline = "not calibrated"
    if cal is not None:
        choice = (cal.get("comparison") or {}).get("choice") or {}
        key = _choice_key(choice, criterion)
        if key is not None:
            c = choice[key]
            method, nll = str(c.get("method")), c.get("nll") or {}
            where = _where(key)
            maps = ", ".join(
                f"{m} {nll[m]:.4f}" + (" (refused)" if m in (c.get("refused") or {}) else "")
                for m in ("temperature", "isotonic")
                if nll.get(m) is not None
            )
            on = f"{c.get('folds')}-fold cross-validation over {c.get('n_fit')} labelled scores"
            if nll.get("none") is None:
                nll_words = "no cross-validated NLL (too few questions)"
            elif method == "none":
                nll_words = f"cross-validated NLL {nll['none']:.4f}" + (f" ({maps})" if maps else "")
            else:
                nll_words = f"cross-validated NLL {nll.get(method, math.nan):.4f} against the read-out's {nll['none']:.4f}"
            verb = "kept" if method == "none" else "chose"
            headline = (
                f"{cal.get('method')} {verb} {_map_words(cal, key, method)} for {where}: {nll_words}, by {on}"
            )
            if c.get("reason"):
                details.append(f"why: {c['reason']}")
            if c.get("close_call"):
                headline += f"; {c['close_call'].split(':')[0]}"
                details.append(c["close_call"])
            if method != "none" and maps:
                details.append(f"each map's cross-validated NLL: {maps}; the read-out's {nll['none']:.4f}")
            others = [k for k in choice if k != key]
            if others:
                details.append(
                    "other maps: "
                    + "; ".join(f"{_where(k)}: {choice[k].get('method')}" for k in others)
                    + " (calibration.json)"
                )
    elif files.calibration is not None:
        details.append(
            "the judge folder's calibration.json is not the one these scores used (another fingerprint): its "
            "choice is not shown"
        )
    if check is not None:
        if cal is None:
            headline = f"{check.get('method')} (the map it chose: the judge folder's calibration.json)"
        nll = ""
        if check.get("nll_before"):
            nll = f"NLL {_iv(check['nll_before'], 4)} raw -> {_iv(check['nll_after'], 4)} calibrated; "
        details.append(
            f"on {check['n']} held-out items of the report ({check['n_questions']} questions): {nll}"
            f"the {check['level']:.0%} intervals cover {_pct_iv(check['coverage'])}, mean width "
            f"{check['mean_width']['value']:.2f}"
        )
    return Verdict("Calibration", headline, details)


def _rule_key(rules: dict[str, Any], criterion: str) -> str | None:
    return criterion if criterion in rules else "*" if "*" in rules else next(iter(rules), None)


def _ties(pairs: dict[str, Any]) -> str:
    """The tie rule of the selective pairwise agreement, with the count (the main table counts ties half)."""
    return (
        f"the judge ties {pairs['n_judge_ties']} of the {pairs['n']} pairs, each counted as a disagreement; "
        "the report's main table counts a tie as half"
    )


def selective_verdict(files: RunFiles, scorer: str | None, criterion: str = OVERALL) -> Verdict | None:
    sel = files.selective
    if sel is not None and files.used.get("selective") is not None:
        from judge.models.selective import Selective

        try:
            if Selective.model_validate(sel).fingerprint() != files.used["selective"]:
                sel = None
        except ValueError:
            sel = None
    check = next((c for c in (files.report or {}).get("selective") or [] if c["scorer"] == scorer), None)
    if sel is None and check is None:
        return None
    promise_src = sel or check or {}
    agreement, delta = promise_src.get("agreement"), promise_src.get("delta")
    promise = (
        f"agreement >= {agreement:.0%} with probability >= {1 - delta:.0%}" if agreement and delta else "?"
    )
    fitted = (sel or {}).get("fitted_on") or {}
    details = [f"the promise: {promise} on trusted scores (judge-calibrate --selective)"]
    heads = []
    for kind in ("pointwise", "pairwise"):
        rules = (sel or {}).get(kind) or {}
        key = _rule_key(rules, criterion)
        on_test = check if kind == "pointwise" else (check or {}).get("pairwise")
        unit = "scores" if kind == "pointwise" else "pairs"
        test = ""
        if on_test:
            share = on_test["share_trusted"]
            trusted = (
                "none trusted" if share.get("value") == 0 else f"{_pct_iv(share)} trusted"
            )  # no [0, 0] interval from a sampled 0
            test = (
                f"on the report's {on_test['n']} held-out {unit}: {trusted}, agreement "
                f"{_pct_iv(on_test['agreement_trusted'])} on them against {_pct_iv(on_test['agreement_all'])} on all"
            )
            if kind == "pairwise" and on_test.get("n_judge_ties"):
                test += f" ({_ties(on_test)})"
        if key is None:
            if on_test:
                heads.append(f"{kind}: {_pct(on_test['share_trusted']['value'])} of {unit} trusted")
                details.append(f"{kind}: {test}")
            continue
        r = rules[key]
        n_items = r.get("n")
        if r.get("threshold") is None:
            least = max(int(fitted.get("min_items") or 0), int(fitted.get("min_testable") or 0))
            why = (
                f"no threshold passed on the {n_items} labelled {unit} it was fitted on: nothing is trusted, "
                "every score goes to a human"
                if kind == "pointwise"
                else f"no threshold passed on the {n_items} labelled {unit}: no preference is trusted"
            )
            reasons = []
            all_agree = (on_test or {}).get("agreement_all") or {}
            if all_agree.get("value") is not None and agreement and all_agree["value"] < agreement:
                reasons.append(
                    f"the judge agrees on {_pct(all_agree['value'])} of all the report's {unit}, below the "
                    f"{agreement:.0%} promised, so only a confident subset could be trusted"
                )
            if least:
                reasons.append(
                    f"a threshold must keep at least {least} of the {n_items} labelled {unit} and beat the promise "
                    "on them by a binomial test"
                )
            details.append(f"{kind}: {why}" + (f" ({'; '.join(reasons)})" if reasons else ""))
            details.append(
                f"  what to do: fit on more labelled {unit}, promise a lower --agreement, or accept a larger "
                f"--delta; {plan_advice(sel or {}, kind, key)}"
            )
            heads.append(f"{kind}: nothing trusted (no threshold passed)")
        else:
            p = r.get("p_value")
            details.append(
                f"{kind}: trusted when the confidence is at least {r['threshold']:.3f}: on the {n_items} labelled "
                f"{unit} it was fitted on, the {r['n_trusted']} at or above it agreed {_pct(r.get('agreement'))}"
                + (f" (binomial p = {p:.3g} <= delta {delta:g})" if p is not None and delta else "")
            )
            if test:
                details.append(f"  {test}")
            share = _pct(on_test["share_trusted"]["value"]) if on_test else "?"
            heads.append(
                f"{kind}: {share} of {unit} trusted"
                + (
                    f", agreement {_pct(on_test['agreement_trusted']['value'])} on them vs "
                    f"{_pct(on_test['agreement_all']['value'])} on all"
                    + (f" ({_ties(on_test)})" if kind == "pairwise" and on_test.get("n_judge_ties") else "")
                    if on_test
                    else ""
                )
            )
    return Verdict("Selective evaluation", "; ".join(heads) or promise, details)


def run_verdicts(files: RunFiles) -> list[Verdict]:
    """Every verdict the files allow (see the module doc), in order."""
    scorer = judge_scorer(files)
    out = [
        agreement_verdict(files, scorer) if scorer else None,
        audit_verdict(files),
        calibration_verdict(files, scorer),
        selective_verdict(files, scorer),
    ]
    return [v for v in out if v is not None]


def verdict_block(verdicts: list[Verdict], files: RunFiles, width: int = 78) -> str:
    """The verdicts as the demo's last screen: a delimited block, each headline then its lines."""
    rule = "=" * width
    lines = [rule, "VERDICT (every figure read from these files, none computed anew):"]
    lines += [f"  {p}" for p in files.paths] + [rule]
    for v in verdicts:
        lines.append(f"{v.topic}: {v.headline}")
        lines += [f"    {d}" for d in v.details]
    if not verdicts:
        lines.append("no report, audit or calibration to judge by")
    lines.append(rule)
    return "\n".join(lines)


__all__ = [
    "AUDIT_MEANING",
    "RunFiles",
    "Verdict",
    "calibration_name",
    "judge_scorer",
    "read_run_files",
    "run_verdicts",
    "verdict_block",
]
