"""Help a new user can work from: every command, positional and option described with its default;
exit status and two examples (kubectl style) in each command's --help, the examples runnable as
printed; ``rlhealth examples`` prints each packaged example with its exact command line, from the
data beside each bundle; and the path from ``rlhealth --help`` to a correct diagnosis of each
packaged example needs nothing else."""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlhealth import cli
from rlhealth.examples import load_examples

from corpus import INCIDENTS_DIR, REPO, load_expected, rlhealth_argv

BIN = Path(sys.executable).parent
EXIT_IN_COMMENT = re.compile(r"\bexit (\d+)\b")


def run(*args, cwd="/", env=None):
    return subprocess.run(rlhealth_argv(*args), capture_output=True, text=True, check=False, cwd=cwd, env=env)


def parsers():
    """(name, parser) of the top level and every subcommand, nested ones included."""
    top = cli.build_parser()
    out, todo = [], [("rlhealth", top)]
    while todo:
        name, p = todo.pop(0)
        out.append((name, p))
        todo += [(f"{name} {n}", sp) for n, sp in p.commands.items()]
    return out


def help_text(p) -> str:
    return p.format_help()


def examples_of(text: str) -> list[tuple[str, str]]:
    """(comment, command line) pairs of the ``Examples:`` section of a help text."""
    section = text.split("\nExamples:\n", 1)[1]
    lines = [ln.strip() for ln in section.splitlines()]
    return [(lines[i][2:], lines[i + 1]) for i in range(len(lines) - 1) if lines[i].startswith("# ") and lines[i + 1]]


def test_the_top_description_says_what_rlhealth_is():
    text = run("--help").stdout
    assert "Command line (contract" not in text
    assert "is this LLM reinforcement-learning training job healthy, or should it be killed?" in text
    assert "KILL, NO-KILL or ERROR" in text and "rlhealth examples" in text


@pytest.mark.parametrize("name,parser", parsers(), ids=[n for n, _ in parsers()])
def test_every_positional_and_option_is_described_with_its_default(name, parser):
    assert parser.description, name
    for group in parser._action_groups:
        for action in group._group_actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                continue
            label = "/".join(action.option_strings) or action.dest
            assert action.help and len(action.help) > 10, f"{name} {label}: no help"
            if action.option_strings:     # an option: what happens without it
                said = action.help + " " + (group.title or "")
                assert "default" in said or "(required" in said, f"{name} {label}: no default in {action.help!r}"
            elif action.nargs == "?":      # an optional positional
                assert "default" in action.help, f"{name} {label}"


@pytest.mark.parametrize("name,parser", parsers(), ids=[n for n, _ in parsers()])
def test_every_command_help_has_exit_status_and_two_examples(name, parser):
    text = help_text(parser)
    assert "Exit status" in text, name
    pairs = examples_of(text)
    assert len(pairs) >= 2, (name, pairs)
    for comment, command in pairs:
        assert command.startswith(("rlhealth ", "{")), (name, command)     # (mcp: a client configuration entry)
        assert "{example:" not in command and "{now:" not in command         # placeholders filled from the data


def _runnable_examples():
    """Help examples that need nothing but the package (they name a packaged example)."""
    found = []
    for name, parser in parsers():
        for comment, command in examples_of(help_text(parser)):
            if "rlhealth examples" in command or command.startswith("rlhealth examples"):
                found.append((name, comment, command))
    return found


@pytest.mark.parametrize("name,comment,command", _runnable_examples(),
                         ids=[f"{n}: {c[:40]}" for n, c, _ in _runnable_examples()])
def test_help_examples_run_as_printed(tmp_path, name, comment, command):
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert "usage error" not in done.stderr and "Traceback" not in done.stderr, (command, done.stderr)
    expected = EXIT_IN_COMMENT.search(comment)
    if expected:
        assert done.returncode == int(expected.group(1)), (command, done.stdout[-2000:], done.stderr)
    else:
        assert done.returncode == 0, (command, done.stderr)
    if "-o report.json" in command:
        assert json.loads((tmp_path / "report.json").read_text())["verdict"]


def test_examples_data_sits_beside_each_bundle_and_matches_its_incident():
    examples = load_examples()
    assert [e["name"] for e in examples] == ["colocated-wedge", "healthy-agentic"]
    for e in examples:
        meta = yaml.safe_load((REPO / "rlhealth" / "examples" / f"{e['name']}.yaml").read_text())
        expected = load_expected(INCIDENTS_DIR / meta["incident"])
        assert (e["now"], e["verdict"]) == (expected["now"], expected["verdict"])
        assert e["title"] and len(e["shows"]) > 40
        assert e["argv"] == ["rlhealth", "diagnose", e["path"], "--now", e["now"]]
    assert "2026-08-01T15:25:00Z" not in Path(cli.__file__).read_text()      # the times are data, not code


def test_a_new_user_goes_from_help_to_a_correct_diagnosis_of_each_example(tmp_path):
    """Only what the tool prints: --help names `rlhealth examples`; its listing gives the command
    line and the verdict to expect for each example; running that line gives that verdict."""
    top = run("--help").stdout
    assert "rlhealth examples" in top
    listing = run("examples").stdout
    runs = re.findall(r"^  run:    (.+)$", listing, re.M)
    expects = re.findall(r"^  expect: (\S+) \(exit (\d+)\)$", listing, re.M)
    assert len(runs) == len(expects) == len(load_examples()) >= 2
    for line, (verdict, code) in zip(runs, expects):
        argv = shlex.split(line)
        assert argv[0] == "rlhealth"
        done = subprocess.run(rlhealth_argv(*argv[1:]), capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == int(code), line
        assert f"VERDICT: {verdict}\n" in done.stdout
        as_json = subprocess.run(rlhealth_argv(*argv[1:], "--format", "json"), capture_output=True, text=True, cwd=tmp_path)
        assert json.loads(as_json.stdout)["verdict"] == verdict


def test_examples_as_json_and_by_path():
    docs = json.loads(run("examples", "--format", "json").stdout)
    assert docs == json.loads(json.dumps(load_examples()))
    path = run("examples", "--path", "colocated-wedge").stdout.strip()
    assert path == docs[0]["path"] and (Path(path) / "manifest.json").is_file()
    bad = run("examples", "--path", "nope")
    assert bad.returncode == 2 and "known: colocated-wedge, healthy-agentic" in bad.stderr


def test_readme_shows_the_help_and_the_examples_listing_as_printed():
    readme = (REPO / "README.md").read_text()
    env = dict(os.environ, COLUMNS="100")
    top = run("--help", env=env).stdout
    assert top.strip() in readme, "README 'Command line' must show `rlhealth --help` (COLUMNS=100) as printed"
    listing = run("examples").stdout
    examples_dir = str(Path(load_examples()[0]["path"]).parent)
    assert listing.replace(examples_dir, ".../site-packages/rlhealth/examples").strip() in readme
