"""Fixtures shared by the unit tests."""
from __future__ import annotations

import shutil
from importlib import resources

import pytest

from rlhealth import packaged
from rlhealth.catalog import load_catalog


@pytest.fixture
def installed_rules(tmp_path, monkeypatch):
    """A copy of the packaged ``rlhealth/rules`` that ``importlib.resources`` finds, with no
    operator signature directory; every cache cleared before and after."""
    rules = tmp_path / "rules"
    shutil.copytree(str(resources.files("rlhealth.rules")), rules, ignore=shutil.ignore_patterns("compiled", "__pycache__"))
    real = resources.files
    monkeypatch.setattr(resources, "files", lambda package: rules if package == "rlhealth.rules" else real(package))
    monkeypatch.setenv("RLHEALTH_SIGNATURES", "")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))

    def clear():
        packaged.packaged_catalog_data.cache_clear()
        packaged.signature_documents.cache_clear()
        load_catalog.cache_clear()
    clear()
    yield rules
    clear()
