"""Loads durable-rules (its C extension ``durable_rules_engine`` and ``durable.engine``) on every
supported Python, or raises ``EngineUnavailable`` naming the Python, the cause and the fix.

durable-rules 2.0.28 (sdist only) calls the C-API function ``PyEval_CallObject``. Up to Python 3.12
that name is a header macro; 3.13 removed it, so on 3.13+:

- a compiler that only warns about implicit declarations (gcc <= 13) builds an extension that
  references a symbol no interpreter exports. The project's own extension
  ``rlhealth._pyeval_compat`` exports it; it is loaded here with global symbol visibility, and
  only when the plain import of ``durable_rules_engine`` fails for exactly that symbol. Such a
  build treats the call's result as an ``int`` (implicit declaration), so only the symbol is
  repaired: durable calls it solely from its message-store/queue/idle-state callbacks, which the
  engine adapter never registers (tests/unit/test_durable_loader.py holds it to that).
- a compiler that rejects implicit declarations (gcc >= 14, clang >= 15, Apple clang) cannot build
  durable-rules at all unless the build is given the declaration: ``STRICT_COMPILER_BUILD_ENV``
  (an environment variable for ``pip install``; durable-rules' setup.py replaces ``CFLAGS``, so
  ``CPPFLAGS`` is the variable that reaches its compiler). An extension built that way calls
  ``PyObject_CallObject`` directly and imports without the compatibility extension. The README's
  set-up command carries it on every Python: up to 3.12 the headers' own ``PyEval_CallObject``
  macro replaces it (a macro-redefinition warning), and ``_pyeval_compat.c`` undefines it first
  (scripts/test-pythons builds durable-rules that way on each Python, once with clang).

Contract: ``import_durable()`` returns ``(durable_rules_engine, durable.engine)`` or raises
``EngineUnavailable`` whose message is complete (Python version, cause, fix). Importing this module
loads nothing, so callers can import ``EngineUnavailable`` before the engine exists.
"""
from __future__ import annotations

import importlib
import os
import re
import sys
from types import ModuleType

MISSING_SYMBOL = "PyEval_CallObject"
COMPAT_MODULE = "rlhealth._pyeval_compat"
STRICT_COMPILER_BUILD_ENV = "CPPFLAGS=-DPyEval_CallObject=PyObject_CallObject"
SUPPORTED_PYTHONS = "3.11, 3.12 or 3.13"
# glibc: "undefined symbol: PyEval_CallObject"; macOS: "symbol not found ... '_PyEval_CallObject'"
_MISSING_SYMBOL_RE = re.compile(r"(?<![A-Za-z0-9_])_?" + MISSING_SYMBOL + r"(?![A-Za-z0-9_])")

# True once rlhealth._pyeval_compat has been loaded with global symbol visibility by this module.
compat_loaded = False


class EngineUnavailable(Exception):
    """durable-rules cannot be loaded in this interpreter: ``cause`` (with the Python) and ``fix``."""

    def __init__(self, cause: str, fix: str):
        super().__init__(f"{cause}. Fix: {fix}")
        self.cause = cause
        self.fix = fix


def python_label() -> str:
    v = sys.version_info
    return f"Python {v.major}.{v.minor}.{v.micro} ({sys.executable})"


def fix_hint() -> str:
    """What the operator does about an unloadable durable-rules."""
    return (f"reinstall rlhealth into a fresh virtual environment of Python {SUPPORTED_PYTHONS} with a C "
            f"compiler present, as the README's set-up command does: `{STRICT_COMPILER_BUILD_ENV} pip install .` "
            f"(the flag lets durable-rules compile on Python 3.13+ with gcc 14+, clang 15+ or Apple clang, which "
            f"reject the implicit declaration of '{MISSING_SYMBOL}'; it is harmless elsewhere)")


def needs_compat(exc: ImportError) -> bool:
    """True when importing durable_rules_engine failed because PyEval_CallObject is missing."""
    return bool(_MISSING_SYMBOL_RE.search(str(exc)))


def _unavailable(cause: str, exc: BaseException) -> EngineUnavailable:
    return EngineUnavailable(f"the rule engine cannot load on {python_label()}: {cause} ({exc})", fix_hint())


def _load_compat() -> None:
    """Load rlhealth._pyeval_compat so that its PyEval_CallObject resolves later dlopens' symbols."""
    global compat_loaded
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | os.RTLD_GLOBAL)
    try:
        importlib.import_module(COMPAT_MODULE)
    except ImportError as exc:
        raise _unavailable(f"durable-rules' C extension needs {MISSING_SYMBOL} (removed in Python 3.13) and "
                           f"rlhealth's compatibility extension {COMPAT_MODULE}, which provides it, cannot "
                           f"be loaded", exc) from exc
    finally:
        sys.setdlopenflags(flags)
    compat_loaded = True


def import_durable() -> tuple[ModuleType, ModuleType]:
    """(durable_rules_engine, durable.engine), loading the compatibility extension only if needed."""
    try:
        rules_engine = importlib.import_module("durable_rules_engine")
    except ImportError as exc:
        if not (needs_compat(exc) and hasattr(sys, "setdlopenflags")):
            raise _unavailable("the durable-rules C extension cannot be imported", exc) from exc
        _load_compat()
        try:
            rules_engine = importlib.import_module("durable_rules_engine")
        except ImportError as retry_exc:
            raise _unavailable(f"the durable-rules C extension cannot be imported even with {COMPAT_MODULE} "
                               f"loaded", retry_exc) from retry_exc
    try:
        engine = importlib.import_module("durable.engine")
    except ImportError as exc:
        raise _unavailable("durable-rules' Python package cannot be imported", exc) from exc
    return rules_engine, engine
