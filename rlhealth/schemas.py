"""The JSON Schemas rlhealth ships (``rlhealth/schema/*.schema.json``), generated from the pydantic
models of the documents they describe.

    python -m rlhealth.schemas            # exit 1 and name the files that differ from the models
    python -m rlhealth.schemas --write    # rewrite them from the models

``tests/unit/test_schemas.py`` fails when a shipped file is not the generated one.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def report_schema() -> dict[str, Any]:
    """``rlhealth.report/v1``: ``rlhealth.report.ReportDocument`` (the report, and ``error`` when
    the command could not run)."""
    from rlhealth.report import SCHEMA_ID, ReportDocument

    schema = ReportDocument.model_json_schema(by_alias=True, mode="serialization")
    schema.pop("title", None)
    return {"$schema": DIALECT, "$id": SCHEMA_ID, "title": "rlhealth diagnosis report", **schema}


def audit_schema() -> dict[str, Any]:
    """``rlhealth.audit/v1``: ``rlhealth.audit.record.AuditDocument`` (the audit's completion record,
    and the run and ``error`` when the audit could not complete)."""
    from rlhealth.audit.record import SCHEMA, AuditDocument

    schema = AuditDocument.model_json_schema(by_alias=True, mode="serialization")
    schema.pop("title", None)
    return {"$schema": DIALECT, "$id": "https://rlhealth/schema/audit.schema.json",
            "title": f"rlhealth audit completion record ({SCHEMA})", **schema}


GENERATED: dict[str, Callable[[], dict[str, Any]]] = {"audit": audit_schema, "report": report_schema}
"""Shipped schema name -> its generator."""


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def shipped_path(name: str) -> Path:
    return SCHEMA_DIR / f"{name}.schema.json"


def stale() -> list[str]:
    """The generated schemas whose shipped file differs from what the models give."""
    out = []
    for name, generate in GENERATED.items():
        path = shipped_path(name)
        if not path.is_file() or path.read_text(encoding="utf-8") != render(generate()):
            out.append(name)
    return out


def write() -> list[Path]:
    written = []
    for name, generate in GENERATED.items():
        path = shipped_path(name)
        path.write_text(render(generate()), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlhealth.schemas", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the shipped schema files from the models")
    args = parser.parse_args(argv)
    if args.write:
        for path in write():
            print(f"wrote {path}")
        return 0
    differ = stale()
    for name in differ:
        print(f"{shipped_path(name)} differs from the models: run python -m rlhealth.schemas --write", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
