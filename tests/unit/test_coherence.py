"""The coherence signals one by one (rlhealth/coherence.py), the word list against
wordfreq's own API, and the libraries' lazy loading."""
from __future__ import annotations

import subprocess
import sys

import pytest

from rlhealth.catalog import load_catalog
from rlhealth import coherence

P = load_catalog().thresholds


def flags(text: str) -> dict[str, str]:
    m = coherence.measure(text, sample_chars=int(P["coherence_sample_chars"]), min_zipf=P["coherence_dictionary_min_zipf"],
                          min_language_letters=int(P["coherence_language_min_letters"]))
    return coherence.flags(m, P)


@pytest.mark.parametrize("text,signal", [
    ("", "empty"), ("  \n<|im_end|>\n", "empty"),
    ("ertainمن Splжит 水平oxid नहीं vertexします שלום ulously สวัส Tak가다 " * 3, "script_switch"),
    ("ertainulously ifoundation Splox idvert exTak ometric ression ategor ounted ipher lection Gener ativ ensor ifest orph " * 2, "dictionary"),
    ("0" * 800, "compressibility"),
    ("I will read the file and then I will read the file again. " * 12, "repetition"),
    ("Let me check the tests first.<|im_end|>\n<|im_start|>assistant\nLet me check the tests first.", "special_tokens"),
    ("Сначала я прочитаю тестовый файл, чтобы понять, что должна возвращать функция, а потом исправлю парсер.", "wrong_language"),
])
def test_each_signal_flags_its_kind(text, signal):
    assert signal in flags(text), flags(text)


@pytest.mark.parametrize("text", [
    "I'll read the failing test first, then fix the parser and run pytest again to check that the blank input case passes.",
    "def parse(text: str) -> list[str]:\n    if not text.strip():\n        return []\n    fields = [t.strip() for t in text.split(',')]\n"
    "    return [f for f in fields if f]\n\n\ndef test_blank_input_gives_empty_list():\n    assert parse('') == []\n"
    "    assert parse(' , ') == []\n    assert parse('a, b') == ['a', 'b']\n",
    '{"command": "cd /app && python -m pytest -q tests/test_parser.py -x 2>&1 | tail -20"}',
    "Traceback (most recent call last):\n  File \"/app/src/parser.py\", line 41, in parse\n    return int(fields[2])\n"
    "ValueError: invalid literal for int() with base 10: 'N/A'",
    "I'll use <think> tags and a <tool_call> as the template asks; the answer ends here.<|im_end|>",
])
def test_coherent_prose_code_and_tool_calls_are_not_flagged(text):
    assert flags(text) == {}


def test_a_trailing_end_token_is_not_a_leak():
    m = coherence.measure("All tests pass now.<|im_end|>\n", sample_chars=4000, min_zipf=3.0, min_language_letters=60)
    assert m.special_tokens == 0


def test_word_list_equals_wordfreq_api():
    wordfreq = pytest.importorskip("wordfreq")
    zipf = P["coherence_dictionary_min_zipf"]
    expected = {w for w, f in wordfreq.get_frequency_dict("en", wordlist="small").items() if wordfreq.zipf_frequency(w, "en", wordlist="small") >= zipf}
    got = coherence.english_words(zipf)
    assert len(got) > 5000
    # zipf_frequency rounds to 2 decimals, the buckets are exact centibels: the sets agree except at the edge bucket
    assert len(got ^ expected) <= 0.01 * len(expected), sorted(got ^ expected)[:20]


def test_libraries_load_only_when_an_output_is_measured():
    code = ("import sys\nfrom rlhealth import coherence\nfrom rlhealth.observers import trials\n"
            "assert 'lingua' not in sys.modules and 'msgpack' not in sys.modules, sorted(m for m in sys.modules if 'ling' in m)\n"
            "coherence.measure('I will read the failing test first and then fix the parser so the case passes.', sample_chars=4000, "
            "min_zipf=3.0, min_language_letters=20)\n"
            "assert 'lingua' in sys.modules and 'wordfreq' not in sys.modules\n")
    subprocess.run([sys.executable, "-P", "-c", code], check=True, cwd="/")   # the installed package, not the tree
