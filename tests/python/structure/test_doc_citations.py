"""Facts are cited from docs/ inside the repository, and every citation resolves.

Code and docs cite ``nki-facts §N`` (docs/nki-facts.md) and ``accelopt-facts §N``
(docs/accelopt-facts.md). Citations of files outside the repository (a "spec
N.M" facts file, "accelopt-behavior §N", "engineering notes") are not allowed,
except in the directories listed in KNOWN_OUTSIDE (being reworked by others;
the list may only shrink).
"""
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCANNED = ("host", "plugins", "pipelines", "docs", "bench", "tests", "nkibench", "scripts", "prompts", "README.md")
EXTENSIONS = (".py", ".cc", ".h", ".hpp", ".md", ".yaml", ".yml", ".lua", ".txt", ".mustache", ".sh", ".json")
OUTSIDE = re.compile(r"\b[Ss]pec (?:section |§)?\d|accelopt-behavior|engineering[ -]notes|/work/shared")
CITATION = re.compile(r"\b(nki|accelopt)-facts §(\d+)(?:\.(\d+))?")

# Directories whose citations are changed by their owners, not here.
KNOWN_OUTSIDE = ()


def _files():
    for top in SCANNED:
        path = os.path.join(REPO, top)
        if os.path.isfile(path):
            yield top
            continue
        for directory, subdirs, names in os.walk(path):
            subdirs[:] = [d for d in subdirs if d not in ("__pycache__", "fixtures")]
            for name in names:
                if name.endswith(EXTENSIONS):
                    yield os.path.relpath(os.path.join(directory, name), REPO)


def _read(rel):
    with open(os.path.join(REPO, rel), encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _sections(doc):
    """Section numbers of a facts page: headings ("## 2.", "### 2.5 ...") and the
    numbered items of its section 4 (validation rules, cited as §4.N)."""
    found, in_rules = set(), False
    for line in _read(os.path.join("docs", doc)).splitlines():
        heading = re.match(r"#+ (\d+)(?:\.(\d+))?[. ]", line)
        if heading:
            found.add((int(heading.group(1)), int(heading.group(2)) if heading.group(2) else None))
            in_rules = heading.group(1) == "4" and heading.group(2) is None
            continue
        item = re.match(r"(\d+)\. ", line)
        if in_rules and item:
            found.add((4, int(item.group(1))))
    return found


def test_no_citation_of_files_outside_the_repository():
    this = os.path.relpath(os.path.abspath(__file__), REPO)
    bad = []
    for rel in _files():
        if rel == this or rel.startswith(KNOWN_OUTSIDE):
            continue
        for number, line in enumerate(_read(rel).splitlines(), 1):
            if OUTSIDE.search(line):
                bad.append(f"{rel}:{number}: {line.strip()[:100]}")
    assert not bad, "cite docs/nki-facts.md or docs/accelopt-facts.md instead:\n" + "\n".join(bad)


def test_every_facts_citation_names_an_existing_section():
    sections = {"nki": _sections("nki-facts.md"), "accelopt": _sections("accelopt-facts.md")}
    bad = []
    for rel in _files():
        for number, line in enumerate(_read(rel).splitlines(), 1):
            for doc, major, minor in CITATION.findall(line):
                key = (int(major), int(minor) if minor else None)
                if key not in sections[doc]:
                    bad.append(f"{rel}:{number}: {doc}-facts §{major}{'.' + minor if minor else ''}")
    assert not bad, "no such section: " + "; ".join(bad)
