// lua/convert.h - JSON <-> Lua conversion for the sandbox.
//
// Rules (documented for script authors in docs/lua-stages.md):
//  * JSON object -> table with the accel.object marker metatable; JSON array ->
//    1-based sequence with the accel.array marker; null -> accel.null (a
//    unique userdata, because nil cannot live in a table); integers stay Lua
//    integers, floats stay floats, strings are binary-safe.
//  * Lua -> JSON: a marker metatable decides. Otherwise an empty table is an
//    object ({}), a table whose keys are exactly 1..n is an array, a table
//    whose keys are all strings is an object, and anything else is an error.
//    nil and accel.null become null; integer vs float is preserved; NaN/inf,
//    invalid UTF-8, functions, threads and other userdata are errors naming
//    the path (e.g. `outputs.rows[3].fn`, Lua's 1-based indices).
//  * Nesting is limited to kMaxDepth levels (this also catches cycles).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "lua/sandbox.h"

namespace accelopt::lua {

/// Deepest nesting of arrays/objects converted in either direction.
inline constexpr int kMaxDepth = 64;

/// Pushes `value` onto the stack of a sandbox state (Sandbox::OpenStageEnv
/// or OpenExpressionEnv must have run). Allocates in the Lua heap, so it must
/// run in protected mode (inside a C function called by Lua); raises a Lua
/// error when nesting exceeds kMaxDepth or memory runs out.
void PushJson(lua_State* L, const nlohmann::json& value);

/// Pushes a lazy, read-only view of `value` (expressions): null is pushed as
/// nil (falsy), other scalars as Lua values, objects/arrays as userdata that
/// convert members on access (`#`, indexing, pairs/ipairs, == by value,
/// tostring gives JSON). `value` must outlive the state. Protected mode only.
void PushJsonView(lua_State* L, const nlohmann::json& value);

/// Converts the Lua value at `index` to JSON. Does not allocate in the Lua
/// heap, so it is safe outside protected mode. `root` names the value in
/// error messages ("outputs"). Throws LuaError("bad_output") whose message
/// names the offending path.
///
/// The C++ copy counts against the state's memory cap (Limits::memory_bytes):
/// every string and every node is charged each time it is referenced, so a
/// table that shares one large string (or one context view) many times cannot
/// build an unbounded value outside the Lua heap. When the caller will also
/// serialise the result (`text_indent` >= 0, the indent it will use; 0 for
/// compact), the text is charged too. Over the cap: LuaError("out_of_memory")
/// and Context::memory_limit_hit is set, so a Lua error raised from that
/// message is classified as out_of_memory as well.
nlohmann::json ToJson(lua_State* L, int index, std::string_view root, int text_indent = -1);

/// Human-readable rendering of a JSON value as a Lua table constructor
/// (debugging aid), e.g. `{a = accel.null, b = {1, 2}}`.
std::string JsonToLuaDebug(const nlohmann::json& value);

}  // namespace accelopt::lua
