"""The packaged knowledge files (``rlhealth/rules/``, read through ``importlib.resources``).

YAML is parsed with libyaml's safe loader when PyYAML has it (the same documents as
``yaml.safe_load``, several times faster), else PyYAML's own. The signature files are parsed once
per process and shared by their two readers: the pattern compile a command starts first thing
(``probes/patterns.py``, before the catalog is imported) and the catalog, which validates them.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any


def parse_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, with the C loader when available."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def packaged_text(name: str) -> str:
    """The text of ``rules/<name>`` (``name`` may hold ``/``)."""
    node = resources.files("rlhealth.rules")
    for part in name.split("/"):
        node = node.joinpath(part)
    return node.read_text(encoding="utf-8")


def packaged_yaml(name: str) -> Any:
    """``rules/<name>`` parsed (a fresh document each call: callers keep what they derive)."""
    return parse_yaml(packaged_text(name))


def _signature_directory():
    return resources.files("rlhealth.rules").joinpath("signatures")


@lru_cache(maxsize=1)
def signature_documents() -> tuple[tuple[str, Any], ...]:
    """``(file name, parsed document)`` of every ``.yaml`` file in ``rules/signatures/``, in name
    order; in place of the document, the exception a file that cannot be read or parsed raised
    (``OSError``, ``UnicodeDecodeError`` or ``yaml.YAMLError``). An unlistable directory is
    raised. The documents are shared: readers must not modify them."""
    import yaml

    out: list[tuple[str, Any]] = []
    for entry in sorted(_signature_directory().iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        try:
            document: Any = parse_yaml(entry.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            document = exc
        out.append((entry.name, document))
    return tuple(out)
