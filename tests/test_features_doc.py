"""docs/features.md agrees with the tests' feature markers."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "features.py"


def _features_module():
    spec = importlib.util.spec_from_file_location("features_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_features_page_matches_the_tests():
    features = _features_module()
    lines = features.PAGE.read_text().splitlines()
    found = features.problems(lines, features.cited_features())
    assert not found, "\n".join(found)


def test_every_feature_of_the_checklist_is_listed():
    features = _features_module()
    rows = [line for line in features.PAGE.read_text().splitlines() if features.ROW.match(line)]
    assert len(rows) == 367
