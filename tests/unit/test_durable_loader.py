"""Loading durable-rules on every supported Python: the compatibility extension is
loaded exactly when the plain import lacks PyEval_CallObject, and an unloadable engine is an
exit-1 run with a valid JSON report that names the Python, the cause and the fix."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest

from rlhealth import durable_loader
from rlhealth.report import load_schema

from corpus import incident_dirs, load_expected, rlhealth_argv

PYTHON = f"Python {sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"


def run_python(code: str) -> subprocess.CompletedProcess:
    """A fresh interpreter (nothing loaded yet), away from the source tree."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          check=False, cwd="/")


def test_compat_extension_is_loaded_exactly_when_the_plain_import_lacks_the_symbol():
    plain = run_python("""
        try:
            import durable_rules_engine
        except ImportError as exc:
            print(exc)
    """)
    assert plain.returncode == 0, plain.stderr
    plain_import_error = plain.stdout.strip()
    loaded = run_python("""
        import json
        from rlhealth import durable_loader, engine
        print(json.dumps({"compat": durable_loader.compat_loaded, "host": engine.durable_engine.Host.__name__}))
    """)
    assert loaded.returncode == 0, loaded.stderr
    state = json.loads(loaded.stdout)
    assert state["host"] == "Host"
    if plain_import_error:   # e.g. durable-rules built on 3.13 by a compiler accepting implicit declarations
        assert "PyEval_CallObject" in plain_import_error
        assert state["compat"] is True
    else:                    # 3.11/3.12, or built with the declaration (CPPFLAGS): nothing extra is loaded
        assert state["compat"] is False


@pytest.mark.parametrize("message, expected", [
    ("/x/durable_rules_engine.cpython-313-x86_64-linux-gnu.so: undefined symbol: PyEval_CallObject", True),
    ("dlopen(/x/durable_rules_engine.so, 0x0002): symbol not found in flat namespace '_PyEval_CallObject'", True),
    ("/x/durable_rules_engine.so: undefined symbol: PyEval_CallObjectWithKeywords", False),
    ("No module named 'durable_rules_engine'", False),
])
def test_only_the_missing_pyeval_callobject_symbol_calls_for_the_compat_extension(message, expected):
    assert durable_loader.needs_compat(ImportError(message)) is expected


def test_missing_compat_extension_is_engine_unavailable_with_the_fix(monkeypatch):
    real_import = importlib.import_module

    def fake_import(name, *args):
        if name == "durable_rules_engine":
            raise ImportError("durable_rules_engine.so: undefined symbol: PyEval_CallObject")
        if name == durable_loader.COMPAT_MODULE:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args)

    monkeypatch.setattr(durable_loader.importlib, "import_module", fake_import)
    flags = sys.getdlopenflags()
    with pytest.raises(durable_loader.EngineUnavailable) as info:
        durable_loader.import_durable()
    assert sys.getdlopenflags() == flags
    assert PYTHON in info.value.cause and durable_loader.COMPAT_MODULE in info.value.cause
    assert durable_loader.STRICT_COMPILER_BUILD_ENV in info.value.fix and "pip install ." in info.value.fix


def test_unloadable_engine_exits_1_with_a_json_report_naming_python_cause_and_fix():
    d = next(d for d in incident_dirs() if "colocated-wedge" in d.name)
    argv = rlhealth_argv("diagnose", str(d / "bundle"), "--now", load_expected(d)["now"], "--format", "json")
    res = run_python(f"""
        import sys
        sys.modules["durable_rules_engine"] = None   # the C extension cannot be imported
        from rlhealth.cli import main
        sys.exit(main({argv[1:]!r}))
    """)
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    jsonschema.validate(doc, load_schema())
    assert doc["verdict"] == "ERROR"
    assert PYTHON in doc["reasoning"] and "durable-rules C extension cannot be imported" in doc["reasoning"]
    assert durable_loader.STRICT_COMPILER_BUILD_ENV in doc["next_action"]
    assert "maintainers" not in json.dumps(doc) and "internal failure" not in json.dumps(doc)
    assert all(g["status"] == "ERROR" for g in doc["gates"].values())
    assert PYTHON in res.stderr and "Traceback" not in res.stderr


def test_adapter_registers_no_durable_callback_that_calls_pyeval_callobject(monkeypatch, capsys):
    """durable's C extension reaches PyEval_CallObject only through its message-store/queue/idle
    callbacks; built on 3.13 by a lenient compiler those call sites keep only 32 bits of the
    returned pointer (implicit int), so a whole diagnosis must never register them."""
    from rlhealth import cli
    from rlhealth.engine import durable_rules_engine

    def refuse(*_args):
        raise AssertionError("a durable callback that goes through PyEval_CallObject was registered")

    callbacks = [n for n in dir(durable_rules_engine) if n.startswith("set_") and n.endswith("_callback")]
    assert "set_store_message_callback" in callbacks
    for name in callbacks:
        monkeypatch.setattr(durable_rules_engine, name, refuse)
    d = next(d for d in incident_dirs() if "colocated-wedge" in d.name)
    code = cli.main(["diagnose", str(d / "bundle"), "--now", load_expected(d)["now"], "--format", "json"])
    assert code == 10 and json.loads(capsys.readouterr().out)["verdict"] == "KILL"


def test_readme_install_command_carries_the_flag_the_error_message_names():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert f"{durable_loader.STRICT_COMPILER_BUILD_ENV} .venv/bin/pip install ." in readme
