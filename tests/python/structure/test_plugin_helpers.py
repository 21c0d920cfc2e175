"""Plugins share the SDK's helpers instead of keeping copies (issue 40, item 3):
reading a file (ReadText), a number field (Number), fixed decimals (Fixed), a
parallel for-loop (ParallelFor), a list parameter (ListParam), the rule that a
screened record is no result (ValidatedForResult), the fenced code blocks of an LLM reply
(FencedBlocks, ExtractFirstCodeBlock), a speedup's noise interval (EstimateSpeedup), significant
figures (Significant), prompt templating (accelopt::sdk::Prompts; no plugin keeps a `Fill` of
its own) and LLM calls (accelopt::sdk::LlmCaller, SpendStopped, StoppedJson, IsSpendCap; no plugin
builds a chat request of its own) are defined once, in host/include/accelopt/sdk/,
and no file under plugins/ defines its own (docs/plugins.md, "Numbers and fan-out")."""
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HELPERS = ("ReadText", "Number", "NumberField", "Fixed", "ParallelFor", "ListParam", "ListOf", "ValidatedForResult",
           "FencedBlocks", "ExtractCodeBlocks", "ExtractFirstCodeBlock", "EstimateSpeedup", "Significant", "Fill",
           "SpendStopped", "StoppedJson", "IsSpendCap", "BeyondNoise", "Repeats")
# A definition or declaration: a return type, the name, "(" at the start of a line.
# The return type may be a template with spaces inside its brackets (std::map<std::string, std::string>).
DEFINITION = re.compile(r"^\s*(?:static\s+|inline\s+)*[A-Za-z_][\w:]*(?:<[^()]*>)?[\s*&]+(" + "|".join(HELPERS) + r")\s*\(")


def _offenders(text, path):
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("//", 1)[0]
        if DEFINITION.search(code) and not code.lstrip().startswith("return"):
            found.append(f"{path}:{number}: {line.strip()}")
    return found


def _plugin_sources():
    """(path relative to the repository, text) of every C++ file under plugins/."""
    for root, _dirs, files in os.walk(os.path.join(REPO, "plugins")):
        for name in sorted(files):
            if name.endswith((".cc", ".h", ".hpp", ".cpp")):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8", errors="replace") as handle:
                    yield os.path.relpath(path, REPO), handle.read()


def test_no_plugin_defines_its_own_copy_of_an_sdk_helper():
    offenders = []
    for path, text in _plugin_sources():
        offenders += _offenders(text, path)
    assert not offenders, "use accelopt::sdk's helper (host/include/accelopt/sdk/):\n" + "\n".join(offenders)


def test_each_helper_is_defined_once_in_the_sdk():
    sdk = os.path.join(REPO, "host", "include", "accelopt", "sdk")
    counts = {name: 0 for name in ("ReadText", "Number", "Fixed", "ParallelFor", "ListParam", "ValidatedForResult",
                                   "FencedBlocks", "ExtractCodeBlocks", "ExtractFirstCodeBlock", "EstimateSpeedup",
                                   "Significant", "SpendStopped", "StoppedJson", "IsSpendCap", "BeyondNoise", "Repeats")}
    for name in os.listdir(sdk):
        with open(os.path.join(sdk, name), encoding="utf-8") as handle:
            for line in handle:
                match = DEFINITION.search(line)
                if match and match.group(1) in counts and not line.lstrip().startswith("return"):
                    counts[match.group(1)] += 1
    assert counts == {name: 1 for name in counts}


def test_the_scanner_sees_the_forms_the_copies_had():
    # The check is only as good as its pattern: these are the copies it replaced.
    for line in ("std::string ReadText(const fs::path& path) {",
                 "std::optional<double> NumberField(const json& object, const std::string& key);",
                 "std::string Fixed(double v, int digits = 3) {",
                 "void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn);",
                 "static std::optional<double> Number(const json& o, const std::string& k) {",
                 "json ListOf(const json& value, const std::string& key) {",
                 "bool ValidatedForResult(const json& record);",
                 "std::optional<std::string> ExtractFirstCodeBlock(const std::string& reply) {",
                 "std::map<std::string, std::string> SpendStopped(const StageContext& ctx, const std::string& endpoint,"):
        assert _offenders(line, "x.cc"), line
    for line in ("  return Fixed(value, 2);", "  const auto n = Number(row, \"latency\");",
                 "using accelopt::sdk::Fixed;", "  out += Fixed(x) + \"x\";"):
        assert not _offenders(line, "x.cc"), line


def test_no_plugin_builds_a_chat_request_of_its_own():
    # accelopt::sdk::LlmCaller sends every chat request (seed, sampling settings, the problem for
    # the spend caps, cancellation, usage): a `"messages"` array under plugins/ would be a copy.
    offenders = []
    for path, text in _plugin_sources():
        for number, line in enumerate(text.splitlines(), 1):
            if '"messages"' in line.split("//", 1)[0]:
                offenders.append(f"{path}:{number}: {line.strip()}")
    assert not offenders, "send chat requests through accelopt::sdk::LlmCaller:\n" + "\n".join(offenders)
