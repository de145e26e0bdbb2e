"""The compiled-database cache of probes/scan.py: a cached database matches exactly what a fresh
compilation matches; a corrupt, unwritable or disabled cache only costs the compilation."""
from __future__ import annotations

import os

import hyperscan
import pytest

from rlhealth.catalog import load_catalog
from rlhealth.probes import bundle as bundle_mod
from rlhealth.probes import patterns as patterns_mod
from rlhealth.probes import scan as scan_mod
from rlhealth.probes.scan import Scanner
from rlhealth import packaged

TEXT = (b"(AsyncVLLMInferenceEngine pid=7, ip=10.0.0.1) INFO 08-01 12:00:01 [loggers.py:259] Engine 000: Avg prompt "
        b"throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 4 reqs\n"
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        b"Traceback (most recent call last):\n  File \"a.py\", line 1\nRuntimeError: NCCL error: unhandled system error\n"
        b"WANDB_MIRROR kind=train step=3 metrics={}\n" * 3)


def _matches(scanner: Scanner) -> list[tuple]:
    out = []
    scanner._db.scan(TEXT, match_event_handler=lambda pid, start, end, flags, ctx: out.append((pid, end)))
    return sorted(out)


@pytest.fixture
def patterns():
    return bundle_mod._catalog_patterns(load_catalog())


@pytest.fixture(autouse=True)
def _no_installed_database(request, monkeypatch):
    """The cache tests run as an editable install does: without the database an install compiles
    (``packaged_rules`` tests install their own)."""
    if "packaged_rules" not in request.fixturenames:
        monkeypatch.setattr(scan_mod, "_packaged_database", lambda key: None)


def _no_compile(monkeypatch):
    def refuse(*a, **kw):
        raise AssertionError("compiled although a cached database exists")
    monkeypatch.setattr(hyperscan, "Database", refuse)


def test_cached_database_matches_fresh_compilation(tmp_path, monkeypatch, patterns):
    monkeypatch.setenv("RLHEALTH_CACHE_DIR", str(tmp_path))
    fresh = _matches(Scanner(patterns))
    cached_files = list(tmp_path.glob("patterns-*.hsdb"))
    assert len(cached_files) == 1 and not list(tmp_path.glob("*.tmp"))
    with monkeypatch.context() as m:
        _no_compile(m)
        assert _matches(Scanner(patterns)) == fresh != []
    # other patterns: another database, never the cached one
    other = Scanner(patterns[:3])
    assert len(list(tmp_path.glob("patterns-*.hsdb"))) == 2 and _matches(other) != fresh


def test_corrupt_cache_file_is_recompiled_and_replaced(tmp_path, monkeypatch, patterns):
    monkeypatch.setenv("RLHEALTH_CACHE_DIR", str(tmp_path))
    patterns = [p for p in patterns if p.key.startswith("x_")] + [p for p in patterns if "memory" in p.regex][:3]
    fresh = _matches(Scanner(patterns))
    assert fresh
    (path,) = tmp_path.glob("patterns-*.hsdb")
    good = path.read_bytes()
    for bad in (b"", good[: len(good) // 2], good[:-64] + bytes(64), b"not a database"):
        path.write_bytes(bad)
        assert _matches(Scanner(patterns)) == fresh
        assert path.read_bytes() == good


def test_disabled_or_unwritable_cache(tmp_path, monkeypatch, patterns):
    fresh = _matches(Scanner(patterns[:5]))
    monkeypatch.setenv("RLHEALTH_CACHE_DIR", "")
    assert scan_mod.database_cache_dir() is None
    assert _matches(Scanner(patterns[:5])) == fresh
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("RLHEALTH_CACHE_DIR", str(blocker / "sub"))   # cannot be created
    assert _matches(Scanner(patterns[:5])) == fresh
    monkeypatch.setenv("RLHEALTH_CACHE_DIR", "relative/cache")      # not absolute: no cache
    assert scan_mod.database_cache_dir() is None


def test_no_cache_file_unless_asked(tmp_path, monkeypatch, patterns):
    """Contract section 6: without RLHEALTH_CACHE_DIR nothing is written, whatever HOME/XDG say."""
    monkeypatch.delenv("RLHEALTH_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert scan_mod.database_cache_dir() is None
    Scanner(patterns[:5])
    assert not any(tmp_path.rglob("*"))


def test_another_users_cache_file_is_not_loaded(tmp_path, monkeypatch, patterns):
    monkeypatch.setenv("RLHEALTH_CACHE_DIR", str(tmp_path))
    patterns = patterns[:5]
    fresh = _matches(Scanner(patterns))
    other_user = os.geteuid() + 1
    monkeypatch.setattr(scan_mod.os, "geteuid", lambda: other_user)
    compiled = []
    real = hyperscan.Database
    monkeypatch.setattr(hyperscan, "Database", lambda *a, **kw: compiled.append(1) or real(*a, **kw))
    assert _matches(Scanner(patterns)) == fresh and compiled == [1]


def test_cache_keeps_the_newest_databases(tmp_path, monkeypatch, patterns):
    monkeypatch.setenv("RLHEALTH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(scan_mod, "DATABASE_CACHE_KEEP", 2)
    for n in (1, 2, 3):
        Scanner(patterns[:n])
    kept = sorted(tmp_path.glob("patterns-*.hsdb"))
    assert len(kept) == 2
    with monkeypatch.context() as m:
        _no_compile(m)
        Scanner(patterns[:3])   # the newest is among the kept


def test_prepared_scanner_is_the_one_scanner_for_returns(patterns):
    patterns = patterns[:7] + (scan_mod.Pattern("only_in_this_test", "prepared scanner test"),)
    fresh = _matches(Scanner(list(patterns)))
    patterns_mod.prepare(patterns)
    thread = patterns_mod._COMPILING[patterns][0]
    scanner = patterns_mod.scanner(patterns)
    assert not thread.is_alive()              # joined: no compile thread left when a reader forks
    assert _matches(scanner) == fresh and patterns_mod.scanner(patterns) is scanner
    patterns_mod._SCANNERS.pop(patterns)


def test_prepared_compilation_failure_is_raised_by_scanner():
    broken = (scan_mod.Pattern("broken", "(unclosed"),)
    patterns_mod.prepare(broken)
    with pytest.raises(hyperscan.error):
        patterns_mod.scanner(broken)
    assert broken not in patterns_mod._SCANNERS and broken not in patterns_mod._COMPILING


def test_a_compilation_for_other_patterns_is_joined_and_not_used(patterns):
    """The early database (read from the files before the catalog validates them) is only used
    when the validated catalog's patterns are the same list; any other compilation is joined."""
    other = patterns[:3] + (scan_mod.Pattern("only_in_this_test", "other patterns test"),)
    wanted = patterns[:3] + (scan_mod.Pattern("only_in_this_test", "wanted patterns test"),)
    patterns_mod.prepare(other)
    thread = patterns_mod._COMPILING[other][0]
    scanner = patterns_mod.scanner(wanted)
    assert not thread.is_alive() and other not in patterns_mod._COMPILING and other not in patterns_mod._SCANNERS
    assert [p.key for p in scanner.patterns] == [p.key for p in wanted]
    assert scanner.patterns[-1].regex == "wanted patterns test"
    patterns_mod._SCANNERS.pop(wanted)


def test_packaged_signature_files_give_the_catalogs_patterns(patterns):
    """What ``diagnose`` compiles before the catalog loads is exactly what the catalog scans for
    (otherwise the early compilation is wasted and the diagnosis compiles a second time)."""
    early = patterns_mod.packaged_signature_patterns()
    assert early is not None and patterns_mod.scan_patterns(early) == patterns


@pytest.fixture
def signature_dir(monkeypatch, tmp_path):
    """The packaged signature directory replaced by an empty temporary one (documents re-read)."""
    monkeypatch.setattr(packaged, "_signature_directory", lambda: tmp_path)
    packaged.signature_documents.cache_clear()
    packaged.packaged_catalog_data.cache_clear()     # an install's stored catalog is of the real files
    yield tmp_path
    packaged.signature_documents.cache_clear()
    packaged.packaged_catalog_data.cache_clear()


@pytest.mark.parametrize("text", ["id: [unclosed\n", "- a list, not a mapping\n", "id: a_signature\npattern: 7\n",
                                  "pattern: 'x'\n", "id: a_signature\npattern: 'x'\ncaseless: 'yes please'\n"])
def test_unusable_signature_file_gives_no_early_patterns(signature_dir, text):
    (signature_dir / "a_signature.yaml").write_text(text)
    assert patterns_mod.packaged_signature_patterns() is None


def test_undecodable_signature_file_gives_no_early_patterns(signature_dir):
    (signature_dir / "a_signature.yaml").write_bytes(b"id: \xff\xfe\n")
    assert patterns_mod.packaged_signature_patterns() is None


def test_early_patterns_read_from_the_signature_files(signature_dir):
    (signature_dir / "b_signature.yaml").write_text("id: b_signature\npattern: 'y'\ncaseless: true\n")
    (signature_dir / "a_signature.yaml").write_text("id: a_signature\npattern: 'x[0-9]+'\n")
    (signature_dir / "README.md").write_text("not a signature")
    assert patterns_mod.packaged_signature_patterns() == [("a_signature", "x[0-9]+", False), ("b_signature", "y", True)]


def test_catalog_names_an_unparseable_signature_file(signature_dir):
    """The catalog validates the documents the early compile read: a broken file is a CatalogError
    naming it, not a traceback."""
    from rlhealth.catalog import CatalogError
    (signature_dir / "a_signature.yaml").write_text("id: [unclosed\n")
    load_catalog.cache_clear()
    try:
        with pytest.raises(CatalogError, match="signatures/a_signature.yaml"):
            load_catalog()
    finally:
        load_catalog.cache_clear()


def test_scanner_from_many_threads_is_one_scanner(patterns):
    """Diagnoses run in threads in the MCP server: concurrent callers get the one scanner of a
    prepared compilation, without a second compilation or a lost entry."""
    import threading

    wanted = patterns[:4] + (scan_mod.Pattern("only_in_this_test", "threads test"),)
    patterns_mod.prepare(wanted)
    got, errors = [], []

    def call():
        try:
            got.append(patterns_mod.scanner(wanted))
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(got) == 8 and all(s is got[0] for s in got)
    assert wanted not in patterns_mod._COMPILING
    patterns_mod._SCANNERS.pop(wanted)


# ----------------------------------------------------------------- the database the install compiled
@pytest.fixture
def packaged_rules(tmp_path, monkeypatch):
    """``rlhealth/rules`` of an install: ``importlib.resources`` finds it at ``tmp_path/rules``."""
    from importlib import resources

    rules = tmp_path / "rules"
    rules.mkdir()
    real = resources.files
    monkeypatch.setattr(resources, "files", lambda package: rules if package == "rlhealth.rules" else real(package))
    monkeypatch.delenv("RLHEALTH_CACHE_DIR", raising=False)
    return rules


def test_the_installed_database_is_loaded_not_compiled(patterns, packaged_rules, monkeypatch):
    fresh = _matches(Scanner(list(patterns)))
    path = scan_mod.write_packaged_database(list(patterns), packaged_rules)
    assert path.parent == packaged_rules / "compiled" and path.name.startswith("patterns-")
    _no_compile(monkeypatch)
    assert _matches(Scanner(list(patterns))) == fresh


def test_an_installed_database_of_other_patterns_or_corrupt_is_not_used(patterns, packaged_rules, monkeypatch):
    fresh = _matches(Scanner(list(patterns)))
    other = scan_mod.write_packaged_database(list(patterns)[:-1], packaged_rules)
    compiled = []
    real = scan_mod._compile_database
    monkeypatch.setattr(scan_mod, "_compile_database", lambda *args: compiled.append(1) or real(*args))
    assert _matches(Scanner(list(patterns))) == fresh and compiled == [1]        # another key: compiled
    key = scan_mod.database_key(*scan_mod.pattern_arguments(list(patterns)))
    other.with_name(f"patterns-{key}.hsdb").write_bytes(b"not a database" * 100)
    assert _matches(Scanner(list(patterns))) == fresh and compiled == [1, 1]     # corrupt: compiled
    written = scan_mod.write_packaged_database(list(patterns), packaged_rules)
    assert sorted(p.name for p in written.parent.iterdir()) == [written.name]     # alone: older ones removed


def test_the_build_step_compiles_the_database(tmp_path):
    """``setup.py build_py`` (what ``pip install .`` runs) writes the database of the packaged
    signatures into the built ``rlhealth/rules/compiled/``, named by the key a diagnosis computes."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    build = tmp_path / "build"
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(build)], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    signatures = patterns_mod.packaged_signature_patterns()
    key = scan_mod.database_key(*scan_mod.pattern_arguments(list(patterns_mod.scan_patterns(signatures))))
    compiled = (build / "rlhealth" / "rules" / "compiled")
    assert [p.name for p in compiled.glob("patterns-*")] == [f"patterns-{key}.hsdb"]
