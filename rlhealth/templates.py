"""The rule base's Jinja environment: how a rule's templates (finding, next action, flip signal,
hand-off, statement) and its set expressions compile, and the compiled code an install stores.

``template(text)`` and ``expression(text)`` are what ``Environment.from_string(text)`` and
``Environment.compile_expression(text, undefined_to_none=False)`` return. Each is built from the
code the install stored for exactly that text (``stored_code``, kept beside the catalog by
``rlhealth.catalog.write_packaged_catalog``) when that code was compiled by this Jinja for this
Python; otherwise Jinja compiles the text, as without a store. Compiling took about a millisecond
per template, most of a small diagnosis' rule run. The stored code is Jinja's own output for the
text (``code_for``); tests/unit/test_templates.py checks it is the code Jinja compiles.
"""
from __future__ import annotations

import functools
import marshal
import sys
from typing import Any, Iterable

import jinja2
from jinja2 import nodes
from jinja2.environment import TemplateExpression
from jinja2.parser import Parser

from rlhealth.units import age_text

ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)
ENV.filters["age"] = age_text

TEMPLATE, EXPRESSION = "template", "expression"


def source_for(kind: str, text: str) -> str | nodes.Template:
    """What Jinja compiles for ``text``: a template's text itself (``from_string``), or for a set
    expression the template ``compile_expression`` builds (the expression assigned to ``result``).
    Raises what Jinja raises for a text it cannot parse."""
    if kind == TEMPLATE:
        return text
    parser = Parser(ENV, text, state="variable")
    expr = parser.parse_expression()
    if not parser.stream.eos:
        raise jinja2.TemplateSyntaxError("chunk after expression", parser.stream.current.lineno, None, None)
    expr.set_environment(ENV)
    return nodes.Template([nodes.Assign(nodes.Name("result", "store"), expr, lineno=1)], lineno=1)


def code_for(kind: str, text: str):
    """The code object Jinja compiles ``text`` to (``source_for``)."""
    return ENV.compile(source_for(kind, text))


def _compiled_by() -> str:
    """What stored code is valid for: this Jinja and this Python's bytecode."""
    return f"jinja2 {jinja2.__version__} {sys.implementation.cache_tag}"


def _entry(kind: str, text: str) -> str:
    return f"{kind}\0{text}"


def stored_code(texts: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """``{"compiled_by": ..., "code": {entry: marshalled code}}`` for ``(kind, text)`` pairs (plain
    data, for the install to store); a text Jinja cannot compile is left out (a diagnosis meets
    the error when it compiles it)."""
    code: dict[str, bytes] = {}
    for kind, text in texts:
        try:
            code[_entry(kind, text)] = marshal.dumps(code_for(kind, text))
        except Exception:  # noqa: BLE001 - compiled (and failing) at run time, as without a store
            continue
    return {"compiled_by": _compiled_by(), "code": code}


def rule_texts(rules) -> list[tuple[str, str]]:
    """Every template and set expression of ``rules`` (``rlhealth.catalog.RuleSpec``) Jinja may
    compile: the templates with a tag, each set expression."""
    out: set[tuple[str, str]] = set()
    for rule in rules:
        for text in (rule.finding, rule.next_action, rule.flip_signal, rule.statement, *(rule.handoff or {}).values()):
            if text and "{" in text:
                out.add((TEMPLATE, text))
        out.update((EXPRESSION, text) for text in rule.set.values())
    return sorted(out)


@functools.lru_cache(maxsize=1)
def _stored() -> dict[str, bytes]:
    from rlhealth.packaged import stored_templates

    data = stored_templates()
    if not isinstance(data, dict) or data.get("compiled_by") != _compiled_by() or not isinstance(data.get("code"), dict):
        return {}
    return data["code"]


def _stored_template(kind: str, text: str) -> jinja2.Template | None:
    blob = _stored().get(_entry(kind, text))
    if not isinstance(blob, bytes):
        return None
    try:
        code = marshal.loads(blob)
    except (ValueError, EOFError, TypeError):
        return None
    return ENV.template_class.from_code(ENV, code, ENV.make_globals(None), None)


@functools.lru_cache(maxsize=2048)
def template(text: str) -> jinja2.Template:
    """``ENV.from_string(text)``."""
    stored = _stored_template(TEMPLATE, text)
    return stored if stored is not None else ENV.from_string(text)


@functools.lru_cache(maxsize=2048)
def expression(text: str) -> TemplateExpression:
    """``ENV.compile_expression(text, undefined_to_none=False)``."""
    stored = _stored_template(EXPRESSION, text)
    if stored is None:
        return ENV.compile_expression(text, undefined_to_none=False)
    return TemplateExpression(stored, False)
