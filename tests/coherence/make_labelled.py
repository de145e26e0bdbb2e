"""Regenerates the labelled coherence set: `python tests/coherence/make_labelled.py` (seeded, deterministic).

labelled.jsonl holds one agent output a line: {"kind", "label" ("coherent" | "incoherent"), "text"}.
Coherent: agent reasoning turns, code (functions taken from this repository's own sources), shell
and JSON tool-call arguments, tracebacks, diffs, Markdown with code fences. Incoherent, one kind per
signal: mixed-script salad, subword-fragment salad, repetition loops, degenerate single-token loops,
chat-template control tokens leaked mid-text, another language than English, empty output.
"""
from __future__ import annotations

import ast
import json
import random
import re
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parent.parent
SEED = 2024
N_PER_KIND = 40

OPENERS = ["I'll start by reading", "Let me look at", "First I need to check", "Now I will open", "Next, let me inspect",
           "To understand the failure I'll read", "I should verify", "Let me run the tests against"]
OBJECTS = ["the test file", "parser.py", "the failing test", "the config loader", "the README", "src/app/main.py",
           "the verifier output", "the fixture data", "the CLI entry point", "tests/test_utils.py"]
REASONS = ["to see what the function should return", "because the error mentions a missing key",
           "so I know which branch is taken", "since the traceback points there", "to confirm the expected format",
           "before changing anything", "and compare it with the expected output"]
FOLLOWS = ["The test expects an empty list for blank input, so I'll update parse() to return [] early.",
           "The assertion fails because the dates are compared as strings; I'll parse them with datetime first.",
           "It looks like the off-by-one is in the loop bound: range(len(items) - 1) skips the last element.",
           "The command exited with status 1 and printed a KeyError for 'timeout'; the default is missing.",
           "All 12 tests pass now. I'll run the whole suite once more to make sure nothing else broke.",
           "The function returns None when the file is missing; the caller should handle that case explicitly.",
           "I'll add a guard for the empty string and rerun pytest on this module only.",
           "That fixed the first failure, but test_roundtrip still fails on unicode input."]
SHELL = ["cd /app && python -m pytest -q tests/test_parser.py -x 2>&1 | tail -20", "grep -rn 'def parse' src/ | head",
         "ls -la /app/src && cat /app/src/parser.py", "git diff --stat && git status --short",
         "python3 -c 'import json,sys; print(json.load(open(\"config.json\"))[\"timeout\"])'",
         "sed -n 1,80p src/app/main.py", "pip install -q -r requirements.txt && pytest -q",
         "find . -name '*.py' -newer setup.cfg | xargs wc -l | sort -n | tail -5"]
TRACEBACK = ('Traceback (most recent call last):\n  File "/app/src/parser.py", line {n}, in parse\n    return '
             'int(fields[{k}])\nValueError: invalid literal for int() with base 10: \'{v}\'')
CHINESE = ["我先阅读测试文件，了解这个函数应该返回什么，然后修复解析器中失败的情况。", "测试期望空输入返回空列表，所以我会在函数开头加一个判断。",
           "现在所有测试都通过了，我再运行一次完整的测试套件，确认没有其他问题。"]
RUSSIAN = ["Сначала я прочитаю тестовый файл, чтобы понять, что должна возвращать функция.",
           "Тест ожидает пустой список для пустого ввода, поэтому я добавлю проверку в начале функции.",
           "Теперь все тесты проходят, я запущу весь набор ещё раз, чтобы убедиться, что ничего не сломалось."]
SPANISH = ["Primero voy a leer el archivo de pruebas para entender qué debe devolver la función.",
           "La prueba espera una lista vacía cuando la entrada está en blanco, así que añadiré una comprobación.",
           "Ahora todas las pruebas pasan; ejecutaré la suite completa otra vez para asegurarme."]
GERMAN = ["Zuerst lese ich die Testdatei, um zu verstehen, was die Funktion zurückgeben soll.",
          "Der Test erwartet eine leere Liste für eine leere Eingabe, deshalb füge ich eine Prüfung hinzu.",
          "Jetzt laufen alle Tests durch; ich starte die ganze Suite noch einmal, um sicherzugehen."]
SCRIPT_FRAGMENTS = ["ertain", "\u0645\u0646", "Spl", "ifoundation", "\u0436\u0438\u0442", "\u6c34\u5e73", "oxid",
                    "\u0928\u0939\u0940\u0902", "vertex", "\u3057\u307e\u3059", "\u05e9\u05dc\u05d5\u05dd", "ulously",
                    "\u0e2a\u0e27\u0e31\u0e2a", "Tak", "\uac00\ub2e4", "\u0434\u0430\u043d", "\u03b1\u03c4\u03b7"]
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|start_header_id|>", "[INST]", "<|fim_middle|>"]


def code_snippets(rng: random.Random) -> list[str]:
    """Whole function definitions from this repository's Python sources (real code)."""
    out = []
    for path in sorted((REPO / "rlhealth").rglob("*.py")) + sorted((REPO / "probes").rglob("*.py")):
        src = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno >= 4:
                out.append(ast.get_source_segment(src, node))
    rng.shuffle(out)
    return [s for s in out if s and 200 <= len(s) <= 3000]


def subword_fragments(rng: random.Random, words: list[str]) -> str:
    """Vocabulary pieces in random order, as a policy with scrambled weights samples them: mostly
    word-inner subwords ("ertain", "ulously"), a few whole words, spaces where a piece carries one."""
    pieces = []
    for _ in range(rng.randint(40, 90)):
        w = rng.choice(words)
        if len(w) > 5 and rng.random() < 0.85:
            i = rng.randint(1, len(w) - 4)
            w = w[i:i + rng.randint(3, 6)]
        pieces.append(w if rng.random() < 0.7 else w.capitalize())
    return "".join(p + (" " if rng.random() < 0.5 else "") for p in pieces)


def prose(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 3)):
        parts.append(f"{rng.choice(OPENERS)} {rng.choice(OBJECTS)} {rng.choice(REASONS)}.")
        parts.append(rng.choice(FOLLOWS))
    return " ".join(parts)


def main() -> None:
    rng = random.Random(SEED)
    code = code_snippets(rng)
    vocab = sorted({w for w in re.findall(r"[A-Za-z]{6,}", " ".join(FOLLOWS + REASONS + code[:50]))})
    rows: list[tuple[str, str, str]] = []
    for i in range(N_PER_KIND):
        rows.append(("agent_prose", "coherent", prose(rng)))
        rows.append(("code", "coherent", code[i % len(code)]))
        call = {"command": rng.choice(SHELL)} if i % 2 else {"path": f"src/{rng.choice(['parser', 'main', 'utils'])}.py",
                                                             "content": code[(i + 7) % len(code)]}
        rows.append(("tool_call", "coherent", prose(rng) + "\n" + json.dumps(call, sort_keys=True)))
        rows.append(("traceback", "coherent", prose(rng) + "\n" + TRACEBACK.format(n=rng.randint(10, 400), k=rng.randint(0, 5),
                                                                                 v=rng.choice(["", "N/A", "3.5", "x"]))))
        rows.append(("markdown", "coherent", f"{rng.choice(FOLLOWS)}\n\n```python\n{code[(i + 3) % len(code)]}\n```\n\n{rng.choice(FOLLOWS)}"))
        rows.append(("salad_mixed_script", "incoherent", " ".join(
            rng.choice(SCRIPT_FRAGMENTS) + (rng.choice(SCRIPT_FRAGMENTS) if rng.random() < 0.6 else "") for _ in range(rng.randint(30, 80)))))
        rows.append(("salad_subword", "incoherent", subword_fragments(rng, vocab)))
        phrase = rng.choice([prose(rng).split(".")[0] + ". ", rng.choice(FOLLOWS) + " "])
        rows.append(("repetition_loop", "incoherent", prose(rng) + " " + phrase * rng.randint(15, 60)))
        rows.append(("degenerate_loop", "incoherent", rng.choice(["the", "\\n", "0", "_", ")"]) * rng.randint(300, 1500)))
        tok = rng.choice(SPECIAL)
        rows.append(("special_tokens", "incoherent", f"{prose(rng)}{tok}\n{rng.choice(SPECIAL)}assistant\n{prose(rng)}"))
        lang = [CHINESE, RUSSIAN, SPANISH, GERMAN][i % 4]
        rows.append(("wrong_language", "incoherent", " ".join(rng.sample(lang, 3))))
        rows.append(("empty", "incoherent", rng.choice(["", "   ", "\n\n", "<|im_end|>", "<|endoftext|>\n"])))
    with open(HERE / "labelled.jsonl", "w", encoding="utf-8") as f:
        for kind, label, text in rows:
            f.write(json.dumps({"kind": kind, "label": label, "text": text}, ensure_ascii=False, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
