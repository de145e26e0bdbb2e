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


def attribute_docstrings(cls: type) -> dict[str, str]:
    """The docstrings of ``cls``'s own annotated attributes, as pydantic's ``use_attribute_docstrings``
    reads them: a string literal right after ``name: type [= value]`` in the class body, cleaned
    like any docstring."""
    import ast
    import inspect
    import textwrap

    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    out: dict[str, str] = {}
    statements = body.body if isinstance(body, ast.ClassDef) else []
    for statement, following in zip(statements, statements[1:]):
        if (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            out[statement.target.id] = inspect.cleandoc(following.value.value)
    return out


def document_fields(module: Any, config: dict[str, Any]) -> None:
    """Give every field of ``module``'s pydantic models whose configuration includes ``config``
    (pydantic's ``use_attribute_docstrings`` in effect) without a description its attribute
    docstring (the one of the class that declares the field last), then rebuild the models in
    definition order, so their JSON Schemas carry the descriptions. The models' validation and
    output are unchanged; only generating a schema pays for reading the source."""
    import inspect

    from pydantic import BaseModel

    models = [obj for obj in vars(module).values()
              if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == module.__name__
              and all(obj.model_config.get(key) == value for key, value in config.items())]
    models.sort(key=lambda m: inspect.getsourcelines(m)[1])   # a model after the models it holds
    docs_of: dict[type, dict[str, str]] = {}
    for model in models:
        docs: dict[str, str] = {}
        for base in reversed(model.__mro__):
            if base in models:
                own = docs_of.setdefault(base, attribute_docstrings(base))
                for name in base.__dict__.get("__annotations__", {}):
                    if name in own:
                        docs[name] = own[name]
                    else:
                        docs.pop(name, None)
        for name, field in model.__pydantic_fields__.items():
            if field.description is None and name in docs:
                field.description = docs[name]
        model.model_rebuild(force=True)


def report_schema() -> dict[str, Any]:
    """``rlhealth.report/v1``: ``rlhealth.report.ReportDocument`` (the report, and ``error`` when
    the command could not run)."""
    import rlhealth.report
    from rlhealth.report import SCHEMA_ID, ReportDocument

    document_fields(rlhealth.report, rlhealth.report.DOCUMENTED)
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
