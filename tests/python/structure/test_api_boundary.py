"""One declared boundary between C++ and Python (issue 40, item 1).

host/include/accelopt/api_entries.hpp and host/python/accelopt/api.py declare the same entries
(name, module, function, version); every entry's function exists; no other C++ file names an
accelopt module in a string; and accelopt.api.check reports any difference between a host's
table and the Python tree (the host runs it before a run and a profile)."""
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO, "host", "python"))

from accelopt import api  # noqa: E402

HEADER = os.path.join(REPO, "host", "include", "accelopt", "api_entries.hpp")
ENTRY = re.compile(r'inline constexpr Entry (k\w+)\{"([^"]+)",\s*"([^"]+)",\s*"([^"]+)",\s*(\d+)\}', re.S)
# A string literal that is a module path of the accelopt package: what a call names.
MODULE_LITERAL = re.compile(r'"accelopt(\.[a-z_]+)+"')
CPP_DIRS = ("host/src", "host/include", "plugins", "flashinfer")  # tests may reach internals


def _header_entries():
    with open(HEADER, encoding="utf-8") as handle:
        text = handle.read()
    return [{"name": m.group(2), "module": m.group(3), "function": m.group(4), "version": int(m.group(5))}
            for m in ENTRY.finditer(text)], text


def test_the_header_and_the_python_registry_declare_the_same_entries():
    entries, text = _header_entries()
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names)), "an entry is declared twice in api_entries.hpp"
    assert api.check(entries) == []
    constants = re.findall(r"inline constexpr Entry (k\w+)\{", text)
    listed = re.search(r"kAll\[\] = \{(.*?)\};", text, re.S).group(1)
    assert sorted(re.findall(r"k\w+", listed)) == sorted(constants), "kAll must list every entry"


def test_every_entry_names_a_function_that_exists():
    for name, entry in api.ENTRIES.items():
        assert callable(api.target(name)), name
        assert isinstance(entry.version, int) and entry.version >= 1 and isinstance(entry.schema, dict), name


def test_no_other_cpp_file_names_an_accelopt_module():
    offenders = []
    for folder in CPP_DIRS:
        for root, _dirs, files in os.walk(os.path.join(REPO, folder)):
            for file in files:
                path = os.path.join(root, file)
                if not file.endswith((".cc", ".h", ".hpp", ".cpp")) or os.path.samefile(path, HEADER):
                    continue
                with open(path, encoding="utf-8", errors="replace") as handle:
                    for number, line in enumerate(handle, 1):
                        code = line.split("//", 1)[0]
                        if MODULE_LITERAL.search(code):
                            offenders.append(f"{os.path.relpath(path, REPO)}:{number}: {line.strip()}")
    assert not offenders, "name an entry of accelopt/api_entries.hpp instead:\n" + "\n".join(offenders)


def test_check_reports_every_difference():
    entries, _ = _header_entries()
    changed = [dict(e) for e in entries]
    changed[0]["version"] += 1
    changed[1]["function"] = "renamed"
    changed = changed[:-1] + [{"name": "made.up", "module": "accelopt.nothing", "function": "f", "version": 1}]
    problems = api.check(changed)
    assert any(entries[0]["name"] in p and "version" in p for p in problems)
    assert any(entries[1]["name"] in p and "renamed" in p for p in problems)
    assert any("made.up" in p for p in problems)
    assert any(entries[-1]["name"] in p and "unknown to the host" in p for p in problems)
    assert api.check("not a list") != []


def test_validate_call_checks_an_entrys_argument_against_its_schema():
    """ACCELOPT_API_VALIDATE=1 (scripts/test.sh) makes the host call this before every JSON call."""
    entry = api.ENTRIES["rules.apply"]
    assert api.validate_call(entry.module, entry.function, {"source": "x = 1", "plan": {}}) is None
    try:
        api.validate_call(entry.module, entry.function, {"plan": {}})
    except ValueError as error:
        text = str(error)
        assert "rules.apply" in text and "'source' is a required property" in text, text
    else:
        raise AssertionError("a call without its required field passed")
    try:
        api.validate_call(entry.module, entry.function, ["not", "an", "object"])
    except ValueError as error:
        assert "is not of type 'object'" in str(error)
    else:
        raise AssertionError("a list passed as an object")
    # A function that is no entry (a test's own module, api.check itself) is not checked.
    assert api.validate_call("accelopt.api", "check", "anything") is None
