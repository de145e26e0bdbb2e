"""The shipped JSON Schemas are the ones generated from the models (``rlhealth.schemas``), and
they hold what the commands print."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import jsonschema
import pytest

from rlhealth import schemas
from rlhealth.audit import internal_failure_record
from rlhealth.audit.core import build_record
from rlhealth.audit.record import RECORD_KEYS
from rlhealth.cli import error_document
from rlhealth.report import internal_failure_report, load_schema


@pytest.mark.parametrize("name", sorted(schemas.GENERATED))
def test_shipped_schema_is_the_generated_one(name):
    shipped = schemas.shipped_path(name).read_text(encoding="utf-8")
    assert shipped == schemas.render(schemas.GENERATED[name]()), \
        f"{schemas.shipped_path(name)} is stale: run python -m rlhealth.schemas --write"
    assert schemas.stale() == []


def test_a_changed_model_makes_the_shipped_schema_stale(monkeypatch):
    original = schemas.GENERATED["report"]
    monkeypatch.setitem(schemas.GENERATED, "report", lambda: {**original(), "title": "something else"})
    assert schemas.stale() == ["report"]
    assert schemas.main([]) == 1


def test_generated_report_schema_is_valid_and_strict():
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$id"] == "rlhealth.report/v1" and schema["additionalProperties"] is False
    validator = jsonschema.Draft202012Validator(schema)
    doc = internal_failure_report("bundle", "boom", now=datetime(2026, 8, 1, tzinfo=timezone.utc))
    assert list(validator.iter_errors(doc)) == []
    for broken in ({**doc, "verdict": "MAYBE"}, {**doc, "surprise": 1},
                   {**doc, "gates": {k: v for k, v in doc["gates"].items() if k != "rollouts"}},
                   {**doc, "next_action_machine": {"kind": "reboot", "command": None, "deciding_rule": None}},
                   {k: v for k, v in doc.items() if k != "fired_rules"}):
        assert list(validator.iter_errors(broken)), broken


@pytest.mark.parametrize("kind", ["usage", "internal"])
def test_error_documents_validate(kind):
    doc = error_document("diagnose", "bad flag", kind=kind, now=datetime(2026, 8, 1, tzinfo=timezone.utc))
    jsonschema.validate(doc, load_schema())
    assert json.loads(json.dumps(doc))["error"]["kind"] == kind


def test_write_rewrites_both_shipped_schemas(tmp_path, monkeypatch):
    monkeypatch.setattr(schemas, "SCHEMA_DIR", tmp_path)
    assert sorted(schemas.stale()) == ["audit", "report"]
    assert sorted(p.name for p in schemas.write()) == ["audit.schema.json", "report.schema.json"]
    assert schemas.stale() == [] and schemas.main([]) == 0
    assert json.loads((tmp_path / "audit.schema.json").read_text())["$defs"]["SecretScan"]["properties"]["status"]["enum"] \
        == ["clean", "findings", "incomplete"]


NOW = datetime(2026, 8, 2, tzinfo=timezone.utc)


def test_generated_audit_schema_is_valid_and_holds_the_record(tmp_path):
    schema = json.loads(schemas.shipped_path("audit").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    (tmp_path / "logs").mkdir()
    record = build_record(tmp_path, None, None, None, None, NOW)
    assert list(record) == RECORD_KEYS and record["status"] == "blocked"
    doc = {**record, "exit_code": 20}
    assert list(validator.iter_errors(doc)) == []
    problem = doc["problems"][0]
    for broken in ({**doc, "status": "maybe"}, {**doc, "exit_code": 3},
                   {k: v for k, v in doc.items() if k != "selection"},
                   {**doc, "problems": [{**problem, "severity": "fatal"}]},
                   {**doc, "problems": [{**problem, "hint": "extra key"}]},
                   {**doc, "inventory": [{**doc["inventory"][0], "status": "maybe"}]},
                   {**doc, "terminal_state": {k: v for k, v in doc["terminal_state"].items() if k != "outcome"}}):
        assert list(validator.iter_errors(broken)), broken


@pytest.mark.parametrize("kind", ["usage", "interrupted", "internal-failure"])
def test_audit_error_documents_validate_and_need_their_error(kind):
    schema = json.loads(schemas.shipped_path("audit").read_text(encoding="utf-8"))
    if kind == "internal-failure":
        doc = {**internal_failure_record(None, NOW, "boom"), "exit_code": 1}
    else:
        doc = error_document("audit", "bad flag", kind=kind, now=NOW, exit_code=None if kind == "usage" else 130)
    jsonschema.validate(doc, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({k: v for k, v in doc.items() if k != "error"}, schema)
