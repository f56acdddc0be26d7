import pytest

from judge.core.errors import ConfigError
from judge.data.config import load_data_sections


def test_shipped_config_resolves_by_bare_name():
    s = load_data_sections("demo.yaml")
    assert s.rubric == "mmie" and s.data.annotations == ["annotations/demo/annotations.jsonl"]
    assert str(s.data_dir) == "runs/demo/data"
    assert s.other["model"]["path"] == "tiny"
    assert load_data_sections("rubric6").other["model"]["path"] == "OpenGVLab/InternVL3-2B-hf"


def test_overrides():
    s = load_data_sections(
        "rubric6.yaml",
        {"data.aggregation": "median", "data.split.seed": 5, "data.criteria": ["overall", "innovation"]},
    )
    assert s.data.aggregation == "median" and s.data.split.seed == 5
    assert s.data.criteria == ["overall", "innovation"]


def test_misspelt_key_names_it_and_lists_allowed():
    with pytest.raises(ConfigError) as e:
        load_data_sections("rubric6.yaml", {"data.agregation": "median"})
    msg = str(e.value)
    assert "data.agregation" in msg and "aggregation" in msg and "annotations" in msg


def test_bad_value_and_unknown_section():
    with pytest.raises(ConfigError, match="data.aggregation"):
        load_data_sections("rubric6.yaml", {"data.aggregation": "mode"})
    with pytest.raises(ConfigError, match="unknown section"):
        load_data_sections("rubric6.yaml", {"trian.epochs": 3})
    with pytest.raises(ConfigError, match="not found"):
        load_data_sections("nope.yaml")
