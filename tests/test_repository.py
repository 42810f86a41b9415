"""Repository rules: lint clean, and CI runs the README's test command verbatim."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_test_command() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- test-command -->\s*```bash\n(.+?)\n```", text)
    assert match, "README.md marks its test command with <!-- test-command -->"
    return match.group(1).strip()


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_test_command() in [line.strip() for line in ci]


@pytest.mark.parametrize(
    "args",
    [
        ["check", "src", "tests", "benchmarks", "docs"],
        ["format", "--check", "src", "tests", "benchmarks", "docs"],
    ],
)
def test_ruff(args):
    out = subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
