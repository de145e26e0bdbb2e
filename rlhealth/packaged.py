"""The packaged knowledge files (``rlhealth/rules/``, read through ``importlib.resources``).

YAML is parsed with libyaml's safe loader when PyYAML has it (the same documents as
``yaml.safe_load``, several times faster), else PyYAML's own; an install stores the parsed
documents of ``rules/`` beside the validated catalog, read instead while the files are the same.
The signature files are parsed once per process and shared by their two readers: the pattern
compile a command starts first thing (``probes/patterns.py``, before the catalog is imported) and
the catalog, which validates them.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any


def parse_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, with the C loader when available."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def packaged_text(name: str) -> str:
    """The text of ``rules/<name>`` (``name`` may hold ``/``)."""
    from importlib import resources

    node = resources.files("rlhealth.rules")
    for part in name.split("/"):
        node = node.joinpath(part)
    return node.read_text(encoding="utf-8")


def packaged_yaml(name: str) -> Any:
    """``rules/<name>`` parsed (a fresh document each call: callers keep what they derive): the
    document the install stored beside the catalog when the packaged files are the ones it stored
    it from (``stored_document``), else parsed now."""
    stored = stored_document(name)
    if stored is not None:
        return stored
    return parse_yaml(packaged_text(name))


def stored_documents() -> dict[str, bytes]:
    """``{name: its parsed document, pickled}`` of every knowledge file directly in ``rules/``
    (``_KEY_FILES``' first folder): what ``write_packaged_catalog`` stores beside the catalog."""
    import pickle

    root = _signature_directory().parent
    with os.scandir(root) as entries:
        names = sorted(e.name for e in entries if e.name.endswith(_KEY_FILES[0][1]) and e.is_file())
    return {name: pickle.dumps(parse_yaml(packaged_text(name)), protocol=pickle.HIGHEST_PROTOCOL) for name in names}


def stored_document(name: str) -> Any:
    """A fresh copy of the parsed ``rules/<name>`` the install stored beside the catalog (the same
    key: these files, this code), or None (not stored, another key, or not plain data). Operator
    signature directories do not change these files, so they do not turn this off."""
    data = _stored_catalog()
    documents = data.get("documents") if data is not None else None
    blob = documents.get(name) if isinstance(documents, dict) else None
    if not isinstance(blob, bytes):
        return None
    import io
    import pickle

    try:
        return _plain_data_unpickler()(io.BytesIO(blob)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError, IndexError,
            KeyError, MemoryError):
        return None


def stored_templates() -> Any:
    """The compiled rule templates the install stored beside the catalog (the same key;
    ``rlhealth.templates.stored_code``), or None. Like ``stored_document``, not turned off by
    operator signature directories (the code is stored per template text)."""
    data = _stored_catalog()
    return data.get("templates") if data is not None else None


SIGNATURES_ENV = "RLHEALTH_SIGNATURES"
"""Operator signature directories (``os.pathsep``-separated), read after the packaged ones."""


def _signature_directory():
    from importlib import resources

    return resources.files("rlhealth.rules").joinpath("signatures")


def operator_signature_directories() -> list[Path]:
    """The operator's own signature directories, in the order they apply: the user configuration
    directory ``$XDG_CONFIG_HOME/rlhealth/signatures`` (default ``~/.config/rlhealth/signatures``)
    when it exists, then every directory of ``$RLHEALTH_SIGNATURES`` (``--signatures DIR`` sets it)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    out = [Path(base) / "rlhealth" / "signatures"]
    out = [d for d in out if d.is_dir()]
    out += [Path(d) for d in os.environ.get(SIGNATURES_ENV, "").split(os.pathsep) if d]
    return out


def signature_documents() -> tuple[tuple[str, Any], ...]:
    """``(file name, parsed document)`` of every ``.yaml`` signature file, in name order: the
    packaged ``rules/signatures/``, then the operator's directories
    (``operator_signature_directories``), a file of the same name replacing the earlier one. In
    place of the document, the exception a file that cannot be read or parsed raised (``OSError``,
    ``UnicodeDecodeError`` or ``yaml.YAMLError``). An unlistable packaged directory is raised; an
    unlistable operator directory is one entry holding its ``OSError``. The documents are shared:
    readers must not modify them."""
    return _signature_documents(tuple(str(d) for d in operator_signature_directories()))


signature_documents.cache_clear = lambda: _signature_documents.cache_clear()   # type: ignore[attr-defined]


@lru_cache(maxsize=8)
def _signature_documents(extra_dirs: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    import yaml

    found: dict[str, Any] = {}
    sources = [sorted(_signature_directory().iterdir(), key=lambda e: e.name)]
    for d in extra_dirs:
        try:
            sources.append(sorted(Path(d).iterdir(), key=lambda e: e.name))
        except OSError as exc:
            found[f"{d} (operator signature directory)"] = exc
    for entries in sources:
        for entry in entries:
            if not entry.name.endswith(".yaml"):
                continue
            try:
                document: Any = parse_yaml(entry.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                document = exc
            found[entry.name] = document
    out: list[tuple[str, Any]] = sorted(found.items(), key=lambda kv: kv[0])
    return tuple(out)


# ----------------------------------------------------------------------------- validated catalog
CATALOG_CACHE_DIR = "compiled"
"""Where an install keeps the validated catalog of the packaged files, under ``rlhealth/rules/``
(written by ``setup.py``'s build step, ``rlhealth.catalog.write_packaged_catalog``; read-only at
run time), next to the compiled signature database."""
CATALOG_FORMAT = "rlhealth-catalog/1"
_KEY_SOURCES = ("catalog.py", "facts.py", "packaged.py", "templates.py")
"""The code a validated catalog depends on (its models, checks and fact fields), part of its key."""
_KEY_FILES = (("", ".yaml"), ("signatures", ".yaml"), ("rulesets", ".yaml"), ("tables", ".csv"))
"""The packaged files the catalog is read from (folder, suffix), part of its key."""


def catalog_key() -> str | None:
    """The key of the validated catalog of the packaged files: a hash of the format, the Python
    version, the code the validation runs (``_KEY_SOURCES``) and every packaged knowledge file (name
    and bytes). None when operator signature directories apply (their catalog is validated at
    every run) or the packaged files are not plain files."""
    if operator_signature_directories():
        return None
    return _packaged_files_key()


def _packaged_files_key() -> str | None:
    import hashlib
    import sys

    root = _signature_directory().parent
    if not isinstance(root, Path):
        return None
    digest = hashlib.sha256(f"{CATALOG_FORMAT} {sys.version_info[:2]}".encode())
    try:
        here = Path(__file__).parent
        for name in _KEY_SOURCES:
            data = (here / name).read_bytes()
            digest.update(f"\0code {name} {len(data)}\0".encode() + data)
        for folder, suffix in _KEY_FILES:
            with os.scandir(root / folder) as entries:
                names = sorted(e.name for e in entries if e.name.endswith(suffix) and e.is_file())
            for name in names:
                data = (root / folder / name).read_bytes()
                digest.update(f"\0file {folder}/{name} {len(data)}\0".encode() + data)
    except OSError:
        return None
    return digest.hexdigest()[:32]


def catalog_cache_name(key: str) -> str:
    return f"catalog-{key}.pickle"


def packaged_catalog_data() -> dict[str, Any] | None:
    """The validated catalog the install stored for exactly these packaged files and this code
    (``catalog_key``), as plain data (``rlhealth.catalog.catalog_data``), or None: operator
    signature directories apply, the install stored none, or its key is not this one. Read once
    per process; a run never writes it."""
    return None if operator_signature_directories() else _stored_catalog()


packaged_catalog_data.cache_clear = lambda: _stored_catalog.cache_clear()   # type: ignore[attr-defined]


@lru_cache(maxsize=1)
def _plain_data_unpickler() -> type:
    """An unpickler of plain data only: what the install stores holds no object of any class."""
    import pickle

    class PlainData(pickle.Unpickler):
        def find_class(self, module, name):
            raise pickle.UnpicklingError(f"{module}.{name} in a stored catalog")

    return PlainData


@lru_cache(maxsize=1)
def _stored_catalog() -> dict[str, Any] | None:
    import pickle

    key = _packaged_files_key()
    if key is None:
        return None
    path = _signature_directory().parent / CATALOG_CACHE_DIR / catalog_cache_name(key)
    try:
        with open(path, "rb") as handle:
            data = _plain_data_unpickler()(handle).load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError,
            IndexError, KeyError, MemoryError):
        return None
    if not isinstance(data, dict) or data.get("format") != CATALOG_FORMAT or data.get("key") != key:
        return None
    return data
