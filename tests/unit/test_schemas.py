"""The shipped JSON Schemas are the ones generated from the models (``rlhealth.schemas``), and
they hold what the commands print."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import jsonschema
import pytest

from rlhealth import schemas
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
