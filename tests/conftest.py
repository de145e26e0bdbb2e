"""pytest options shared by the suite (helpers live in tests/corpus.py)."""
from __future__ import annotations

import pytest


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/incidents/*/report.golden.md from the current output (review the diff!)")


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")
