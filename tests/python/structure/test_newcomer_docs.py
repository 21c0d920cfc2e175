"""What a newcomer needs is in the docs, and the docs' examples work (issue 36, item 10).

* README's commands name only paths that exist from the repository root (its FlashInfer
  example used ``../shared/...``, which only worked from one directory);
* the NKIBench problem format (nkibench/README.md) is linked from README and the docs, and it
  documents how a problem declares its % of peak and every field of the ``peak`` object;
* docs/rules.md says how to write a rule and load it from outside the install, with the
  example file it names;
* docs/plugins.md has one build line for an out-of-tree plugin (tests/host/plugin/
  out_of_tree_build_test.cc runs it);
* docs/extending.md lists every extension point with an example and a test that exist
  (issue 40, item 5).
"""
import os
import re

from accelopt import peak

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _read(relative):
    with open(os.path.join(REPO, relative), encoding="utf-8") as handle:
        return handle.read()


def _code_blocks(text):
    """The text of each fenced code block (any language)."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_readme_commands_name_paths_that_exist_from_the_repository_root():
    missing = []
    for block in _code_blocks(_read("README.md")):
        for line in block.splitlines():
            command = line.split("#", 1)[0]
            assert "../" not in command, f"README: a path relative to another folder: {line.strip()}"
            for path in re.findall(r"(?<![\w/$.-])((?:pipelines|nkibench|tests|docs|bench|scripts|prompts)/[\w./-]+)", command):
                if "<" in path or not path.strip("/"):
                    continue
                if not os.path.exists(os.path.join(REPO, path.rstrip("/"))):
                    missing.append(path)
    assert not missing, f"README names paths that do not exist: {missing}"


def test_the_nkibench_format_is_linked_and_documents_the_peak_model():
    assert "(nkibench/README.md)" in _read("README.md")
    assert "nkibench/README.md" in _read("docs/optimize.md") and "nkibench/README.md" in _read("docs/search.md")
    text = _read("nkibench/README.md")
    assert "## Peak model" in text and "def peak_work():" in text
    described = peak.describe({"problem": "silu", "values": {"M": 256, "N": 1024}, "latency_ms": 0.05})
    table = text[text.index("## Peak model"):]
    for field in described:
        assert f"`{field}`" in table, f"nkibench/README.md does not document the peak field {field!r}"


def test_writing_a_rule_and_loading_it_from_outside_is_documented():
    text = _read("docs/rules.md")
    assert "## Writing a rule" in text and "ACCELOPT_RULES_PATH" in text
    assert os.path.isfile(os.path.join(REPO, "docs/examples/rules/swap_multiply.py"))
    assert "docs/examples/rules/swap_multiply.py" in text
    assert "ACCELOPT_RULES_PATH" in _read("docs/cli.md")


def test_plugins_md_has_one_build_line_for_an_out_of_tree_plugin():
    lines = [line for block in _code_blocks(_read("docs/plugins.md")) for line in block.splitlines()
             if line.startswith("g++ ")]
    assert len(lines) == 1, lines
    assert "-shared" in lines[0] and "-fPIC" in lines[0] and "host/include" in lines[0]


def test_extending_md_lists_every_extension_point_with_an_existing_example_and_test():
    # issue 40, item 5: pipeline, Lua stage, native stage, rule move, evaluator/backend, search
    # strategy, report kind, LLM provider; each row's example and test paths exist.
    text = _read("docs/extending.md")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| extension point"))
    table = []
    for line in lines[start + 2:]:  # the first table only: header, rule, then rows up to a blank line
        if not line.startswith("| "):
            break
        table.append(line)
    points = [row.split("|")[1].strip() for row in table]
    assert points == ["pipeline", "native stage", "Lua stage", "rule move", "backend (evaluator)", "search strategy",
                      "report kind", "LLM provider"], points
    for row in table:
        example = row.split("|")[4]
        paths = re.findall(r"`((?:pipelines|docs|tests|host)/[^`*]+)`", example)
        assert paths, row
        for path in paths:
            assert os.path.exists(os.path.join(REPO, path.rstrip("/"))), f"docs/extending.md names {path}, which does not exist"
    assert "The\nroute of one candidate" in text or "The route of one candidate" in text
    assert "## The route of one candidate" in _read("docs/architecture.md")
