"""The rule templates' compiled code an install stores (``rlhealth.templates``): it is the code
Jinja compiles for each text, a diagnosis builds its templates from it instead of compiling them,
and code compiled by another Jinja or Python, or not code at all, is not used."""
from __future__ import annotations

import pytest

from rlhealth import catalog as catalog_mod
from rlhealth import templates as T
from rlhealth.catalog import load_catalog
from rlhealth.diagnose import diagnose
from rlhealth.render import render
from rlhealth.usage import parse_now

from corpus import incident_dirs, load_expected


def test_every_rule_text_is_stored_as_the_code_jinja_compiles(monkeypatch):
    texts = T.rule_texts(load_catalog().rules)
    kinds = {kind for kind, _ in texts}
    assert kinds == {T.TEMPLATE, T.EXPRESSION} and len(texts) > 100
    captured = []
    compile_string = T.ENV.from_string
    monkeypatch.setattr(T.ENV, "from_string", lambda source, *a, **k: captured.append(source) or compile_string(source, *a, **k))
    for kind, text in texts:
        if kind == T.TEMPLATE:
            jinja = T.ENV.compile(text, raw=True)
        else:
            captured.clear()
            T.ENV.compile_expression(text, undefined_to_none=False)
            (node,) = captured
            jinja = T.ENV.compile(node, raw=True)
        assert T.ENV.compile(T.source_for(kind, text), raw=True) == jinja, text
    stored = T.stored_code(texts)
    assert set(stored["code"]) == {f"{kind}\0{text}" for kind, text in texts}


@pytest.fixture
def stored_templates(installed_rules):
    catalog_mod.write_packaged_catalog(installed_rules)
    T._stored.cache_clear()
    T.template.cache_clear()
    T.expression.cache_clear()
    yield
    T._stored.cache_clear()
    T.template.cache_clear()
    T.expression.cache_clear()


def _reports():
    out = []
    for d in incident_dirs()[::8]:
        expected = load_expected(d)
        report = diagnose(d / "bundle", now=parse_now(expected["now"]), mode_override=expected.get("mode_arg"))
        out.append(render(report, "json"))
    return out


def test_a_diagnosis_builds_its_templates_from_the_stored_code(stored_templates, monkeypatch):
    assert T._stored()
    with monkeypatch.context() as m:
        m.setattr(T.ENV, "from_string", lambda *a, **k: pytest.fail("compiled although stored"))
        m.setattr(T.ENV, "compile_expression", lambda *a, **k: pytest.fail("compiled although stored"))
        with_store = _reports()
    T.template.cache_clear()
    T.expression.cache_clear()
    with monkeypatch.context() as m:
        m.setattr(T, "_stored", lambda: {})
        assert _reports() == with_store


@pytest.mark.parametrize("damage", ["other-jinja", "not-code", "no-code"])
def test_foreign_or_damaged_stored_code_is_compiled_again(stored_templates, monkeypatch, damage):
    (kind, text) = next(t for t in T.rule_texts(load_catalog().rules) if t[0] == T.EXPRESSION)
    data = {"compiled_by": T._compiled_by(), "code": dict(T._stored())}
    if damage == "other-jinja":
        data["compiled_by"] = "jinja2 0.0 cpython-00"
    elif damage == "not-code":
        data["code"][f"{kind}\0{text}"] = b"\x00garbage"
    else:
        data["code"] = None
    monkeypatch.setattr("rlhealth.packaged.stored_templates", lambda: data)
    T._stored.cache_clear()
    T.expression.cache_clear()
    calls = []
    compile_expression = T.ENV.compile_expression
    monkeypatch.setattr(T.ENV, "compile_expression", lambda *a, **k: calls.append(a) or compile_expression(*a, **k))
    T.expression(text)
    assert calls == [(text,)]
