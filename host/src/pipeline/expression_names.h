// expression_names.h - the global names a `${{ }}` expression reads, found
// without running it, so `validate` can check them against the names the
// expression will see at run time (docs/pipelines.md, "Expressions").
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace accelopt {

/// One read of a global name, with the `.field` chain that follows it:
/// `stages.load.outputs.cases` gives name "stages", fields {load, outputs, cases}.
struct NameUse {
  std::string name;
  std::vector<std::string> fields;
  size_t offset = 0;  // byte offset of the name in the expression text
};

/// Every global name `code` (one Lua expression, without `${{ }}`) reads, in
/// order. Field names (`a.b`, `a:b()`), table-constructor keys (`{k = v}`),
/// keywords, strings, numbers and comments are skipped. Returns nullopt when
/// the expression defines a function (its parameters and locals would need
/// scope analysis); callers then skip their name checks. Never throws.
std::optional<std::vector<NameUse>> GlobalNames(const std::string& code);

}  // namespace accelopt
