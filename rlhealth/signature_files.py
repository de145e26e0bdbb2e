"""The packaged signature files (``rules/signatures/*.yaml``), read and parsed once per process.

Two readers share them: the pattern compile a command starts first thing (``probes/patterns.py``,
before the catalog is imported) and the catalog, which validates them. Documents are shared, so
readers must not modify them.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any


def _directory():
    return resources.files("rlhealth.rules").joinpath("signatures")


@lru_cache(maxsize=1)
def signature_documents() -> tuple[tuple[str, Any], ...]:
    """``(file name, parsed document)`` of every ``.yaml`` file in ``rules/signatures/``, in name
    order; in place of the document, the exception a file that cannot be read or parsed raised
    (``OSError``, ``UnicodeDecodeError`` or ``yaml.YAMLError``). An unlistable directory is raised."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out: list[tuple[str, Any]] = []
    for entry in sorted(_directory().iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        try:
            document: Any = yaml.load(entry.read_text(encoding="utf-8"), Loader=loader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            document = exc
        out.append((entry.name, document))
    return tuple(out)
