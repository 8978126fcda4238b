#!/usr/bin/env python3
"""Keep docs/features.md in step with the tests' ``@pytest.mark.feature(...)`` markers.

    scripts/features.py          rewrite the Tests column from the markers
    scripts/features.py --check  exit 1 (saying why) when the page and the tests disagree
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "features.md"
TESTS = REPO / "tests"
ROW = re.compile(r"^\| (?P<id>[A-Z]+-\d+) \|(?P<middle>.*)\|(?P<tests>[^|]*)\|\s*$")
STATUSES = ("done", "partial", "not yet")


def _feature_ids(decorators: list[ast.expr]) -> list[str]:
    ids = []
    for decorator in decorators:
        if (
            isinstance(decorator, ast.Call)
            and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "feature"
        ):
            ids += [a.value for a in decorator.args if isinstance(a, ast.Constant)]
    return ids


def _is_test(node: ast.AST) -> bool:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")


def cited_features() -> dict[str, list[str]]:
    """Feature ID -> the tests (``file::name``) that cite it."""
    cited: dict[str, list[str]] = defaultdict(list)
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        relative = path.relative_to(TESTS).as_posix()
        for node in tree.body:
            if _is_test(node):
                for feature in _feature_ids(node.decorator_list):
                    cited[feature].append(f"{relative}::{node.name}")
            elif isinstance(node, ast.ClassDef):
                class_ids = _feature_ids(node.decorator_list)
                for item in node.body:
                    if _is_test(item):
                        for feature in class_ids + _feature_ids(item.decorator_list):
                            cited[feature].append(f"{relative}::{node.name}::{item.name}")
    return cited


def render(lines: list[str], cited: dict[str, list[str]]) -> list[str]:
    out = []
    for line in lines:
        match = ROW.match(line)
        if match:
            tests = ", ".join(f"`{t}`" for t in cited.get(match["id"], []))
            line = f"| {match['id']} |{match['middle']}| {tests} |" if tests else \
                f"| {match['id']} |{match['middle']}|  |"
        out.append(line)
    return out


def problems(lines: list[str], cited: dict[str, list[str]]) -> list[str]:
    found, seen = [], set()
    for line in lines:
        match = ROW.match(line)
        if not match:
            continue
        feature = match["id"]
        seen.add(feature)
        cells = [c.strip() for c in match["middle"].split("|")]
        status = cells[2] if len(cells) > 2 else ""
        if status not in STATUSES:
            found.append(f"{feature}: status {status!r} is not one of {STATUSES}")
        elif status in ("done", "partial") and not cited.get(feature):
            found.append(f"{feature}: marked {status} but no test cites it")
        elif status == "not yet" and cited.get(feature):
            found.append(f"{feature}: marked 'not yet' but cited by {cited[feature][0]}")
    for feature in sorted(set(cited) - seen):
        found.append(f"{feature}: cited by {cited[feature][0]} but not listed in docs/features.md")
    if render(lines, cited) != lines:
        found.append("the Tests column is stale: run scripts/features.py")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    lines = PAGE.read_text().splitlines()
    cited = cited_features()
    if args.check:
        found = problems(lines, cited)
        for problem in found:
            print(problem)
        return 1 if found else 0
    PAGE.write_text("\n".join(render(lines, cited)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
