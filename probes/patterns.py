"""The scan's pattern list: every signature's pattern, then the extractors (what a line must match
for a parser to read it), and the one compiled database per pattern list.

Light on purpose (no pydantic, no catalog): a command starts compiling the database from the
packaged signature files before it imports and validates the rest, so the compilation (which
releases the GIL) runs on another core meanwhile. ``scanner`` is keyed by the pattern list itself,
so the database of the validated catalog is that early one only when the lists are equal.
"""
from __future__ import annotations

import threading

from rlhealth.probes.parse.nvidia_smi import GPU_NAME_LINE_PATTERN
from rlhealth.probes.events import EVENT_SCAN_EXPRESSIONS, EVENT_TRIGGER
from rlhealth.probes.scan import Pattern, Scanner
from rlhealth.packaged import packaged_catalog_data, signature_documents

EXTRACTORS: dict[str, str] = {
    "x_boundary": r"task=\S+/0 \| \[iris setup\] step 1/2",
    "x_wandb": r"WANDB_MIRROR\s+kind=",
    "x_dict_end": r"'trainer/global_step':\s*[0-9]+\s*,?\s*\}",
    "x_step_progress": r"Training Step Progress:",
    "x_phase": r"(?:Started|Finished): '[A-Za-z0-9_./-]+'",
    "x_genbuf": r"Generation Buffer Progress:",
    "x_stats": r"Avg generation throughput: [0-9.]+ tokens/s",
    "x_eager": r"(?:enforce_eager\s*[=:]|Cudagraph is disabled under eager mode|Enforce eager set|Graph capturing finished)",
    "x_batch": r"Batch generation complete: [0-9]+/[0-9]+ successful",
    "x_excbreak": r"Exception breakdown: \{",
    "x_use_tis": r"use_tis[\"']?\s*[:=]",
    "x_weight_reload": r"(?:finish_weight_reload|initialize_layerwise_reload)",
    "x_weight_update": r"\b(?:update_weights(?:_from_(?:ipc|disk|distributed|tensor))?|update_named_weights|broadcast_weights)\b",
    "x_weight_reload_done": r"(?:finish_weight_reload|finalize_layerwise_reload)",
    "x_generator_init": r"TerminalBenchGenerator initialized",
    "x_source_rev": r"MarinSkyRL now at [0-9a-f]{7,40}",
    "x_resumed": r"Resumed training from global_step [0-9]+",
    "x_engine_model": r"Initializing an? (?:V[0-9]+ )?LLM engine[^\n]*with config: model=",
    "x_gpu_name": GPU_NAME_LINE_PATTERN,
    "x_event": EVENT_TRIGGER,
}
EXTRACTOR_PREFILTERS: dict[str, str] = {
    # Every finelog line starts with "task=", so the whole extractor as a hyperscan pattern ran its
    # \S+ after each of them (a tenth of the scan). Hyperscan looks for the literal tail only; the
    # router keeps the key when the whole extractor matches the line's bytes (the bytes hyperscan
    # scanned, the same \s set), so the lines keyed are exactly those the extractor matches.
    "x_boundary": r"/0 \| \[iris setup\] step 1/2",
}


EXTRACTOR_PARTS: dict[str, tuple[str, ...]] = {
    # the same lines, faster: see EVENT_SCAN_EXPRESSIONS
    "x_event": EVENT_SCAN_EXPRESSIONS,
}


def scan_patterns(signatures: list[tuple[str, str, bool]]) -> tuple[Pattern, ...]:
    """The patterns scanned for: ``(id, pattern, caseless)`` of every signature in catalog order,
    then every extractor (its prefilter where it has one, its parts where it has them)."""
    return (tuple(Pattern(key, regex, caseless) for key, regex, caseless in signatures)
            + tuple(Pattern(k, EXTRACTOR_PREFILTERS.get(k, v), parts=EXTRACTOR_PARTS.get(k, ()))
                    for k, v in EXTRACTORS.items()))


def packaged_signature_patterns() -> list[tuple[str, str, bool]] | None:
    """``(id, pattern, caseless)`` of the packaged signature files, in the catalog's order (file
    name), not validated; None when any file does not read as a mapping with those fields (the
    catalog then reports it, and compiles what it validated). The catalog the install stored for
    these files (``rlhealth.packaged.packaged_catalog_data``) gives them without parsing a file."""
    stored = packaged_catalog_data()
    if stored is not None:
        return [(v["values"]["id"], v["values"]["pattern"], v["values"]["caseless"])
                for v in stored["catalog"]["signatures"].values()]
    out = []
    try:
        for _, document in signature_documents():
            key, regex, caseless = document["id"], document["pattern"], document.get("caseless", False)
            if not (isinstance(key, str) and isinstance(regex, str) and isinstance(caseless, bool)):
                return None
            out.append((key, regex, caseless))
    except (OSError, TypeError, KeyError, AttributeError):
        return None
    return out


_SCANNERS: dict[tuple[Pattern, ...], Scanner] = {}
_COMPILING: dict[tuple[Pattern, ...], tuple[threading.Thread, list]] = {}
_LOCK = threading.Lock()
"""Serializes ``prepare`` and ``scanner``: diagnoses may run in threads (the MCP server)."""


def prepare(patterns: tuple[Pattern, ...]) -> None:
    """Start compiling the database of ``patterns`` in a thread; ``scanner`` waits for it. A failed
    compilation is raised by ``scanner``, in the caller's thread."""
    with _LOCK:
        if patterns in _SCANNERS or patterns in _COMPILING:
            return
        box: list = []

        def build() -> None:
            try:
                box.append(Scanner(list(patterns)))
            except BaseException as exc:     # handed to scanner()
                box.append(exc)

        thread = threading.Thread(target=build, name="rlhealth-pattern-compile", daemon=True)
        _COMPILING[patterns] = (thread, box)
        thread.start()


def prepare_packaged() -> None:
    """``prepare`` the database of the packaged signature files, read without the catalog."""
    signatures = packaged_signature_patterns()
    if signatures is not None:
        prepare(scan_patterns(signatures))


def scanner(patterns: tuple[Pattern, ...]) -> Scanner:
    """The one scanner of ``patterns``. Joins every compilation ``prepare`` started, this one's
    and any other's (a database started for other patterns is dropped), so no compile thread is
    left running when a reader forks."""
    with _LOCK:
        failed: BaseException | None = None
        for key, (thread, box) in list(_COMPILING.items()):
            thread.join()
            del _COMPILING[key]
            if key == patterns:
                if isinstance(box[0], Scanner):
                    _SCANNERS[key] = box[0]
                else:
                    failed = box[0]
        if failed is not None:
            raise failed
        found = _SCANNERS.get(patterns)
        if found is None:
            found = _SCANNERS[patterns] = Scanner(list(patterns))
        return found
