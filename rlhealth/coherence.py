"""Coherence of agent output: independent measurements of one sampled text.

Each signal is a number (``Measures``); which values mark a sample incoherent is a named limit in
``rules/thresholds.yaml`` (``coherence_*``), applied by ``flags``. The signals:

- ``empty``: nothing but whitespace and chat-template control tokens;
- ``script_switch_fraction``: changes of writing system between consecutive letters, per letter;
- ``dictionary_fraction``: share of the Latin-letter words (camelCase and snake_case split) that are
  words of the English word-frequency list of ``wordfreq`` at or above a Zipf frequency;
- ``compress_ratio``: zlib-compressed size over raw size (a loop compresses far below prose or code);
- ``repeat_fraction``: share of the token trigrams that repeat an earlier one (a loop repeats almost all);
- ``special_tokens``: chat-template control tokens (``<|im_start|>``, ``<|eot_id|>``, ``[INST]``)
  before the end of the text;
- ``language`` / ``language_confidence``: the language ``lingua`` detects in the prose (letters
  only), among the small set in ``rules/coherence.yaml``.

The two libraries load lazily, on the first text measured: a bundle without sampled agent output
never imports them. The English word list is read from ``wordfreq``'s packaged ``small`` list (its
cBpack format), without importing ``wordfreq`` (whose tokenizer imports cost more than the whole
rest of a small diagnosis); tests/unit/test_coherence.py checks it equals
``wordfreq.get_frequency_dict``.
"""
from __future__ import annotations

import functools
import gzip
import importlib.util
import re
import unicodedata
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rlhealth.forks import Forked, Standby
from rlhealth.packaged import packaged_yaml

@functools.lru_cache(maxsize=1)
def config() -> dict:
    """rules/coherence.yaml: languages, the expected language, the control-token pattern."""
    return packaged_yaml("coherence.yaml")


@functools.lru_cache(maxsize=4)
def english_words(min_zipf: float) -> frozenset[str]:
    """Words of wordfreq's packaged English ``small`` list with a Zipf frequency >= ``min_zipf``."""
    import msgpack   # a dependency of wordfreq
    spec = importlib.util.find_spec("wordfreq")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("wordfreq is not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "small_en.msgpack.gz"
    with gzip.open(path, "rb") as f:
        data = msgpack.load(f, raw=False)
    header, buckets = data[0], data[1:]
    if not isinstance(header, dict) or header.get("format") != "cB" or header.get("version") != 1:
        raise ValueError(f"{path}: not a cBpack v1 word list")
    # bucket i holds the words of frequency 10 ** (-i / 100); Zipf = log10(frequency) + 9
    last = int(round((9.0 - min_zipf) * 100))
    return frozenset(w for i, bucket in enumerate(buckets[:last + 1]) for w in bucket)


@functools.lru_cache(maxsize=1)
def _detector():
    """lingua's detector of the configured languages (low-accuracy mode: trigram models only)."""
    from lingua import Language, LanguageDetectorBuilder
    names = config().get("languages") or []
    return LanguageDetectorBuilder.from_languages(*(getattr(Language, n) for n in names)).with_low_accuracy_mode().build()


SIGNALS = ("empty", "script_switch", "dictionary", "compressibility", "repetition", "special_tokens", "wrong_language")
"""Signal names, in the order a sample's first flag is reported."""


@dataclass(frozen=True)
class Measures:
    chars: int
    tokens: int
    empty: bool
    letters: int
    script_switch_fraction: float
    latin_words: int
    dictionary_fraction: float | None
    compress_ratio: float | None
    repeat_fraction: float | None
    repeat_trigram: str | None
    special_tokens: int
    special_token: str | None
    prose_letters: int
    language: str | None
    language_confidence: float | None


def _script(ch: str) -> str | None:
    if not ch.isalpha():
        return None
    if ch.isascii():
        return "LATIN"
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return "OTHER"
    first = name.split(" ")[0]
    # Japanese writes kanji and kana together, Korean hangul with hanja: one writing system each
    return {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK"}.get(first, first)


_SPLIT_CAMEL = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_LATIN_RUN = re.compile(r"[A-Za-z]+")


@functools.lru_cache(maxsize=1)
def _special_re() -> re.Pattern:
    return re.compile(config()["special_token_pattern"])


def measure(text: str | None, *, sample_chars: int, min_zipf: float, min_language_letters: int) -> Measures:
    """The signals of one agent output (its first ``sample_chars`` characters)."""
    raw = (text or "")[:sample_chars]
    special = [m for m in _special_re().finditer(raw)]
    stripped_end = raw.rstrip()
    mid = [m for m in special if m.end() < len(stripped_end)]
    body = _special_re().sub(" ", raw).strip()
    tokens = body.split()
    letters = switches = 0
    prev = None
    for ch in body:
        s = _script(ch)
        if s is None:
            continue
        letters += 1
        if prev is not None and s != prev:
            switches += 1
        prev = s
    words = [w.lower() for run in _LATIN_RUN.findall(body) for w in _SPLIT_CAMEL.findall(run) if len(w) >= 2]
    dict_fraction = None
    if words:
        vocab = english_words(min_zipf)
        dict_fraction = round(sum(1 for w in words if w in vocab) / len(words), 3)
    encoded = body.encode("utf-8")
    compress = round(len(zlib.compress(encoded, 9)) / len(encoded), 3) if encoded else None
    repeat, trigram = None, None
    lowered = [t.lower() for t in tokens]
    if len(lowered) >= 3:
        trigrams = Counter(zip(lowered, lowered[1:], lowered[2:]))
        (top, _), = trigrams.most_common(1)
        total = len(lowered) - 2
        repeat, trigram = round(1 - len(trigrams) / total, 3), " ".join(top)
    prose = " ".join(re.findall(r"[^\W\d_]+", body))
    prose_letters = sum(1 for ch in prose if ch.isalpha())
    language = confidence = None
    if prose_letters >= min_language_letters:
        values = _detector().compute_language_confidence_values(prose)
        if values:
            language, confidence = values[0].language.name, round(float(values[0].value), 3)
    return Measures(chars=len(raw), tokens=len(tokens), empty=not body, letters=letters,
                    script_switch_fraction=round(switches / letters, 4) if letters else 0.0,
                    latin_words=len(words), dictionary_fraction=dict_fraction, compress_ratio=compress,
                    repeat_fraction=repeat, repeat_trigram=trigram, special_tokens=len(mid),
                    special_token=mid[0].group(0) if mid else None, prose_letters=prose_letters,
                    language=language, language_confidence=confidence)


def measure_all(texts: list[str], *, sample_chars: int, min_zipf: float, min_language_letters: int) -> list[Measures]:
    """``measure`` of each text, in order."""
    return [measure(text, sample_chars=sample_chars, min_zipf=min_zipf, min_language_letters=min_language_letters)
            for text in texts]


FORK = "fork"
"""``measuring``'s ``apart`` for a process that diagnoses once: the sample is measured in a child
forked when it is known."""


class AfterScan:
    """``measuring``'s ``apart`` for a process that diagnoses once while a trial reader takes the
    second CPU: ``begin`` (``probes.bundle.read_bundle``'s ``when_scanned``, called once this
    process has scanned its share of the logs) starts a ``standing_by`` child, so the libraries
    load on the CPU the scan no longer needs while the readers' results are gathered; without
    ``begin``, it is ``FORK``. ``close`` ends a child nobody asked."""

    def __init__(self):
        self.standby: Standby | None = None

    def begin(self) -> None:
        if self.standby is None:
            self.standby = standing_by()

    def close(self) -> None:
        if self.standby is not None:
            self.standby.close()


def measuring(texts: list[str], param: dict, apart=None):
    """``measure_all(texts)`` with the measurement parameters of ``param`` (rules/thresholds.yaml),
    as an object whose ``result()`` gives it, or None: measure here (no texts, or ``apart`` None).

    ``apart`` is how the caller lets the sample be measured in another process, so the libraries'
    first load (most of the work) runs beside the rest of the diagnosis: a ``Standby`` it started
    (``standing_by``: the libraries load from the start), ``FORK`` (a child forked now, which
    loads them while the caller observes the rest), or an ``AfterScan`` (one of the two). Only a
    process that diagnoses once asks for any: one that diagnoses many bundles (triage, the MCP
    server) keeps the libraries it loaded."""
    args = (list(texts), measure_params(param))
    if isinstance(apart, AfterScan):
        apart = apart.standby if apart.standby is not None else FORK
    if isinstance(apart, Standby):
        if apart.forked and texts:
            return _Asked(apart, args)
        apart.close()
        return None
    if apart == FORK and texts and not _detector.cache_info().currsize:
        return Forked(_measure_all, *args, name="rlhealth-coherence")
    return None


def standing_by() -> Standby:
    """A child (``rlhealth.forks.Standby``) that loads the two libraries now, on a second CPU, and
    measures the coherence sample once it is known (``measuring``): for a caller whose other CPU
    is idle meanwhile (``rlhealth diagnose`` of a bundle too small for a trial reader, while it
    imports the diagnosis). This module imports nothing of the diagnosis, so the child does not
    either."""
    return Standby(_load_libraries, _measure_all, name="rlhealth-coherence")


def _load_libraries() -> None:
    english_words(packaged_yaml("thresholds.yaml")["coherence_dictionary_min_zipf"])
    _detector().compute_language_confidence_values("the language models load on first use")


def _measure_all(texts: list[str], params: dict) -> list[Measures]:
    return measure_all(texts, **params)


class _Asked:
    """The measures a ``Standby`` computes (``result``: asked once)."""

    def __init__(self, standby: Standby, args: tuple):
        self.standby, self.args, self.value = standby, args, None

    def result(self) -> list[Measures]:
        if self.value is None:
            self.value = self.standby.call(*self.args)
        return self.value


def measure_params(param: dict) -> dict:
    """The keyword arguments of ``measure`` from rules/thresholds.yaml."""
    return dict(sample_chars=int(param["coherence_sample_chars"]), min_zipf=param["coherence_dictionary_min_zipf"],
                min_language_letters=int(param["coherence_language_min_letters"]))


def flags(m: Measures, p: dict) -> dict[str, str]:
    """signal -> why, for each signal whose named limit (``p``: rules/thresholds.yaml) the sample crosses."""
    out: dict[str, str] = {}
    if m.empty:
        out["empty"] = "empty output"
        return out
    if m.letters >= p["coherence_script_switch_min_letters"] \
            and m.script_switch_fraction > p["coherence_script_switch_max_fraction"]:
        out["script_switch"] = f"token salad ({m.script_switch_fraction:.2f} writing-system switches per letter)"
    if m.latin_words >= p["coherence_dictionary_min_words"] and m.dictionary_fraction is not None \
            and m.dictionary_fraction < p["coherence_dictionary_min_fraction"]:
        out["dictionary"] = f"token salad ({round(m.dictionary_fraction * 100)}% of {m.latin_words} words in the dictionary)"
    if m.chars >= p["coherence_compress_min_chars"] and m.compress_ratio is not None \
            and m.compress_ratio < p["coherence_compress_min_ratio"]:
        out["compressibility"] = f"degenerate loop (compresses to {round(m.compress_ratio * 100)}% of its size)"
    if m.tokens >= p["coherence_repetition_min_tokens"] and m.repeat_fraction is not None \
            and m.repeat_fraction > p["coherence_repetition_max_fraction"]:
        out["repetition"] = f"repetition loop ({round(m.repeat_fraction * 100)}% of trigrams repeated, most often {m.repeat_trigram!r})"
    if m.special_tokens >= p["coherence_special_tokens_min_tokens"]:
        out["special_tokens"] = f"leaked chat template ({m.special_tokens} control tokens mid-text, first {m.special_token})"
    expected = config().get("expected_language")
    if m.language and expected and m.language != expected \
            and (m.language_confidence or 0.0) >= p["coherence_language_min_fraction"]:
        out["wrong_language"] = f"wrong language ({m.language.title()} confidence {m.language_confidence:.2f}, expected {expected.title()})"
    return out
