import copy

import pytest
import yaml

from judge.core.errors import ConfigError
from judge.core.rubric import OVERALL, Rubric, load_rubric, shipped_dir

EXPECTED = {
    "SA": [
        "text_quality",
        "image_quality",
        "text_image_coherence",
        "context_consistency",
        "innovation",
        "stylistic_consistency",
    ],
    "PBL": [
        "text_quality",
        "image_quality",
        "text_image_coherence",
        "method_quality",
        "creativity_engagement",
        "stylistic_consistency",
    ],
    "MSR": [
        "question_text_understanding",
        "question_image_understanding",
        "reasoning_clarity",
        "partial_correctness",
        "final_answer_accuracy",
        "excellency",
    ],
}


def test_mmie_rubric_contents(rubric):
    assert (rubric.scale.min, rubric.scale.max) == (0, 6)
    assert {f: [c.id for c in fam.criteria] for f, fam in rubric.families.items()} == EXPECTED
    for fam_id, fam in rubric.families.items():
        assert fam.uses_reference == (fam_id == "MSR")
        assert fam.criterion_ids[-1] == OVERALL
        for crit in [*fam.criteria, fam.overall]:
            assert set(crit.levels) == {0, 3, 6} and all(crit.levels.values()) and crit.measures


def _reordered(obj):
    """The same mapping with every dict's keys in reverse order."""
    if isinstance(obj, dict):
        return {k: _reordered(obj[k]) for k in reversed(list(obj))}
    if isinstance(obj, list):
        return [_reordered(x) for x in obj]
    return obj


def test_hash_stable_across_key_order_and_changes_with_text(tmp_path, rubric):
    raw = yaml.safe_load(open(shipped_dir() / "mmie.yaml"))
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(_reordered(raw), sort_keys=False))
    assert load_rubric(path).hash == rubric.hash
    assert load_rubric("mmie").hash == rubric.hash
    changed = copy.deepcopy(raw)
    changed["families"]["PBL"]["criteria"][2]["levels"][3] += "."
    path.write_text(yaml.safe_dump(changed))
    assert load_rubric(path).hash != rubric.hash


def test_unknown_key_names_it_and_lists_allowed(tmp_path):
    raw = yaml.safe_load(open(shipped_dir() / "mmie.yaml"))
    raw["families"]["SA"]["criteria"][0]["mesures"] = "typo"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as e:
        load_rubric(path)
    msg = str(e.value)
    assert "families.SA.criteria.0.mesures" in msg and "unknown key" in msg
    assert "measures" in msg and "levels" in msg  # what is allowed there


def test_level_off_scale_and_missing_rubric(tmp_path):
    raw = yaml.safe_load(open(shipped_dir() / "mmie.yaml"))
    raw["families"]["MSR"]["overall"]["levels"][7] = "too high"
    with pytest.raises(ValueError, match="outside the scale"):
        Rubric.model_validate(raw)
    with pytest.raises(ConfigError, match="not found"):
        load_rubric("no-such-rubric")


def test_rubric_show_cli(capsys, rubric):
    from judge.cli import data_main

    assert data_main(["rubric", "show", "mmie"]) == 0
    out = capsys.readouterr().out
    assert rubric.hash[:12] in out and "final_answer_accuracy" in out and "Final answer accuracy" in out


def test_shipped_rubrics_and_configs_are_found_from_any_folder(tmp_path, monkeypatch):
    from judge.data.config import find_config

    monkeypatch.chdir(tmp_path)  # no rubrics/ here: the package's own files answer
    assert load_rubric("mmie").name == "mmie"
    assert find_config("rubric6").parent == shipped_dir()
    assert find_config("rubric6.yaml") == shipped_dir() / "rubric6.yaml"
    with pytest.raises(ConfigError, match=r"shipped: .*mmie"):
        load_rubric("nope")


def test_a_users_own_rubrics_folder_comes_first(tmp_path, monkeypatch):
    raw = yaml.safe_load(open(shipped_dir() / "mmie.yaml"))
    raw["description"] = "my edited copy"
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "rubrics" / "mmie.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    mine = load_rubric("mmie")
    assert mine.description == "my edited copy"
    assert mine.hash != Rubric.model_validate(yaml.safe_load(open(shipped_dir() / "mmie.yaml"))).hash
