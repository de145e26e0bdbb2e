"""The validated catalog an install stores (``rlhealth.catalog.write_packaged_catalog``): a
diagnosis without operator signature directories loads it instead of parsing and validating the
packaged files; it is the same catalog, used only for exactly the files and code it was stored for,
and never for an operator's signature directories (validated at every run)."""
from __future__ import annotations

import pickle

import pytest

from rlhealth import catalog as catalog_mod
from rlhealth import packaged
from rlhealth.catalog import CatalogError, catalog_data, catalog_from_data, load_catalog, validate_catalog
from rlhealth.probes import patterns as patterns_mod


def test_stored_catalog_is_the_validated_one():
    validated = validate_catalog()
    data = pickle.loads(pickle.dumps(catalog_data(validated)))
    rebuilt = catalog_from_data(data)
    assert rebuilt == validated
    assert [r.model_fields_set for r in rebuilt.rules] == [r.model_fields_set for r in validated.rules]
    assert rebuilt.signatures["benign_engine_core_exit"].model_fields_set == validated.signatures["benign_engine_core_exit"].model_fields_set


def test_an_install_loads_its_stored_catalog(installed_rules, monkeypatch):
    path = catalog_mod.write_packaged_catalog(installed_rules)
    assert path.parent == installed_rules / "compiled" and path.name == f"catalog-{packaged.catalog_key()}.pickle"
    expected = validate_catalog()
    monkeypatch.setattr(catalog_mod, "validate_catalog", lambda: pytest.fail("validated although stored"))
    monkeypatch.setattr(packaged, "parse_yaml", lambda text: pytest.fail("parsed although stored"))
    assert load_catalog() == expected
    early = patterns_mod.packaged_signature_patterns()
    assert early == [(s.id, s.pattern, s.caseless) for s in expected.signatures.values()]


def test_an_edited_file_is_validated_not_loaded(installed_rules):
    catalog_mod.write_packaged_catalog(installed_rules)
    before = packaged.catalog_key()
    path = installed_rules / "signatures" / "benign_engine_core_exit.yaml"
    path.write_text(path.read_text().replace("status: stable", "status: 7"))
    packaged.signature_documents.cache_clear()     # a new process reads the edited file
    assert packaged.catalog_key() != before and packaged.packaged_catalog_data() is None
    with pytest.raises(CatalogError, match="signatures/benign_engine_core_exit.yaml"):
        load_catalog()


def test_operator_signatures_are_always_validated(installed_rules, tmp_path, monkeypatch):
    catalog_mod.write_packaged_catalog(installed_rules)
    operator = tmp_path / "operator"
    operator.mkdir()
    (operator / "my_signature.yaml").write_text("id: my_signature\npattern: '[unclosed'\n")
    monkeypatch.setenv("RLHEALTH_SIGNATURES", str(operator))
    assert packaged.catalog_key() is None and packaged.packaged_catalog_data() is None
    with pytest.raises(CatalogError, match="my_signature.yaml"):
        load_catalog()


@pytest.mark.parametrize("content", [b"not a pickle", pickle.dumps({"format": "other"}),
                                     pickle.dumps(ValueError("an object of a class"))])
def test_a_corrupt_or_foreign_stored_catalog_is_not_used(installed_rules, content):
    path = catalog_mod.write_packaged_catalog(installed_rules)
    path.write_bytes(content)
    assert packaged.packaged_catalog_data() is None
    assert load_catalog() == validate_catalog()


def test_the_build_step_stores_the_catalog(tmp_path):
    """``setup.py build_py`` (what ``pip install .`` runs) stores the validated catalog in the built
    ``rlhealth/rules/compiled/`` under the key a diagnosis of the built files computes."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    build = tmp_path / "build"
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(build)], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    check = ("from rlhealth.packaged import packaged_catalog_data, stored_document\n"
             "from rlhealth.catalog import load_catalog, validate_catalog\n"
             "assert packaged_catalog_data() is not None\n"
             "assert stored_document('sets.yaml') is not None\n"
             "assert load_catalog() == validate_catalog()\n")
    env = dict(os.environ, PYTHONPATH=str(build), RLHEALTH_SIGNATURES="", XDG_CONFIG_HOME=str(tmp_path / "none"))
    done = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_knowledge_files_are_stored_parsed_beside_the_catalog(installed_rules, monkeypatch):
    names = sorted(p.name for p in installed_rules.glob("*.yaml"))
    parsed = {name: packaged.parse_yaml(packaged.packaged_text(name)) for name in names}
    catalog_mod.write_packaged_catalog(installed_rules)
    monkeypatch.setattr(packaged, "parse_yaml", lambda text: pytest.fail("parsed although stored"))
    assert len(names) > 10
    for name in names:
        assert packaged.packaged_yaml(name) == parsed[name], name
    first = packaged.packaged_yaml("sets.yaml")
    first["terminal_states"].append("changed by a caller")
    assert packaged.packaged_yaml("sets.yaml") == parsed["sets.yaml"]      # a fresh document each call


def test_an_edited_knowledge_file_is_parsed_not_loaded(installed_rules):
    catalog_mod.write_packaged_catalog(installed_rules)
    path = installed_rules / "mode.yaml"
    path.write_text(path.read_text() + "\nadded_by_test: 1\n")
    packaged.packaged_catalog_data.cache_clear()         # a new process reads the edited file
    assert packaged.stored_document("mode.yaml") is None
    assert packaged.packaged_yaml("mode.yaml")["added_by_test"] == 1


def test_a_stored_document_that_is_no_plain_data_is_parsed(installed_rules):
    path = catalog_mod.write_packaged_catalog(installed_rules)
    data = pickle.loads(path.read_bytes())
    data["documents"]["sets.yaml"] = pickle.dumps(ValueError("an object of a class"))
    path.write_bytes(pickle.dumps(data))
    packaged.packaged_catalog_data.cache_clear()
    assert packaged.stored_document("sets.yaml") is None
    assert packaged.packaged_yaml("sets.yaml") == packaged.parse_yaml(packaged.packaged_text("sets.yaml"))
