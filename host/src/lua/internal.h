// lua/internal.h - shared internals of the Lua sandbox (not for other modules).
//
// Conventions:
//  * The allocator's userdata is the state's Context, so any C function, hook
//    or coroutine reaches it with ContextOf(L) (no registry lookups).
//  * Sandbox objects (marker metatables, accel.null, proxy metatables) live in
//    the registry under the addresses of the k*Key variables below; their
//    identities are also cached in Context so conversions can compare
//    pointers without touching the Lua heap.
//  * C functions exported to Lua are written as `int Fn(lua_State*, Context&)`
//    and registered through Trampoline<Fn>.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>

#include <lua.hpp>
#include <nlohmann/json.hpp>

#include "lua/sandbox.h"

namespace accelopt::lua::detail {

/// Registry keys (their addresses are the keys; see lua_rawgetp).
inline char kArrayMtKey;       ///< metatable marking JSON arrays
inline char kObjectMtKey;      ///< metatable marking JSON objects
inline char kNullKey;          ///< the accel.null userdata
inline char kFailMtKey;        ///< metatable of accel.fail error objects
inline char kEnvKey;           ///< the read-only _ENV proxy of the sandbox
inline char kViewObjectMtKey;  ///< metatable of lazy JSON object views
inline char kViewArrayMtKey;   ///< metatable of lazy JSON array views

/// What the message handler learned about the error that ended a call.
struct CapturedError {
  bool captured = false;
  std::string message;    ///< the error as text
  std::string location;   ///< "file.lua:LINE" or ""
  std::string traceback;  ///< "stack traceback:\n..." or ""
  bool is_failure = false;  ///< raised by accel.fail
  std::string failure_kind;
  std::string failure_message;
  nlohmann::json failure_details;
};

/// Per-state bookkeeping, owned by Sandbox; also the allocator's userdata.
struct Context {
  // Allocator (bytes).
  size_t used_bytes = 0;
  size_t limit_bytes = static_cast<size_t>(-1);
  bool memory_limit_hit = false;
  bool error_slack_given = false;
  /// Why a host function refused memory before allocating it (string.rep),
  /// appended to the out_of_memory message.
  std::string memory_detail;

  // Deadline hook.
  bool has_deadline = false;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds timeout{0};
  bool timed_out = false;
  bool cancelled = false;

  const HostHooks* hooks = nullptr;
  std::string chunk_name;  ///< "filter.lua"
  Limits limits;

  // Identities of sandbox objects (set while opening the environment).
  const void* array_mt = nullptr;
  const void* object_mt = nullptr;
  const void* null_value = nullptr;
  const void* fail_mt = nullptr;
  const void* view_object_mt = nullptr;
  const void* view_array_mt = nullptr;

  /// Expression context (EvaluateExpression), or null.
  const nlohmann::json* expression_context = nullptr;

  CapturedError error;
};

/// The Context of any thread of a sandbox state.
inline Context& ContextOf(lua_State* L) {
  void* ud = nullptr;
  lua_getallocf(L, &ud);
  return *static_cast<Context*>(ud);
}

/// Adapts `int Fn(lua_State*, Context&)` to lua_CFunction. A std::exception
/// thrown by Fn becomes a Lua error with its message (destructors have run by
/// then); Lua's own errors (C++ throws of another type) pass through untouched.
template <int (*Fn)(lua_State*, Context&)>
int Trampoline(lua_State* L) {
  std::string error;
  try {
    return Fn(L, ContextOf(L));
  } catch (const std::exception& e) {
    error = e.what();
  }
  lua_pushlstring(L, error.data(), error.size());
  return lua_error(L);
}

// ---- sandbox.cc ----------------------------------------------------------

/// Opens the allowed standard libraries (without touching globals seen by
/// scripts), creates the marker metatables, accel.null and the fail
/// metatable, and records their identities in Context. Protected mode only.
void OpenBaseObjects(lua_State* L, Context& ctx);
/// Pushes a new read-only proxy whose reads fall through to the table at
/// `env_index`; writes raise "globals are read-only (use local)".
void PushReadOnlyProxy(lua_State* L, int env_index);
/// Copies the named fields of the table at `from_index` into the table at
/// `to_index` (skipping missing ones). Protected mode only.
void CopyFields(lua_State* L, int from_index, int to_index, const char* const* names);
/// The safe `load`: text chunks only, default env = the sandbox _ENV.
int SafeLoad(lua_State* L, Context& ctx);
/// __newindex of read-only environments: "globals are read-only (use local)".
int ReadOnlyNewIndex(lua_State* L);
/// For long-running C functions: true once the deadline passed or the host
/// cancelled (then the flags are set and the hook fires on every
/// instruction, as after the deadline hook). The caller raises a Lua error;
/// the failure is classified as "timeout" / "cancelled".
bool DeadlineReached(lua_State* L, Context& ctx);

// ---- pattern.cc -------------------------------------------------------------

/// Replaces string.find, string.match, string.gmatch and string.gsub (also
/// reached as s:find(...)) with implementations of the Lua 5.4 pattern
/// language that count their steps and stop at the deadline or on cancel:
/// a backtracking pattern ("(.-)(.-)(.-)x" on a long subject) no longer
/// runs unbounded inside one C call. Protected mode only.
void InstallBoundedPatterns(lua_State* L);
/// Plain substring search that checks the deadline as it goes (the naive
/// search is O(n*m)). Returns the offset of `needle` in `hay` or npos;
/// raises a Lua error at the deadline.
size_t BoundedFind(lua_State* L, std::string_view hay, std::string_view needle);

// ---- bounded_lib.cc ---------------------------------------------------------

/// Replaces string.rep, table.insert, table.remove and table.move, whose C
/// loops the instruction hook cannot stop (`string.rep('', math.maxinteger)`,
/// `table.move({}, 1, math.maxinteger, 1)`, a huge `__len`): string.rep counts
/// each repetition as at least one byte of the memory limit, the table
/// functions check the deadline every few thousand elements. Protected mode only.
void InstallBoundedLibs(lua_State* L);

// ---- accel_common.cc --------------------------------------------------------

/// Adds the `accel` functions of stages and expressions alike to the table on
/// top of the stack: array, object, null, is_null, len, contains, join, keys
/// and json.{encode,decode}. Protected mode only.
void SetAccelCommon(lua_State* L);

// ---- host_table.cc --------------------------------------------------------

/// Pushes the `accel` table for stage scripts (SetAccelCommon plus logging,
/// fail, fs.* and python_call). Protected mode only.
void PushAccelTable(lua_State* L);
/// The `print` replacement (logs at info level).
int LuaPrint(lua_State* L);

// ---- expression.cc --------------------------------------------------------

/// Pushes the read-only _ENV of expressions (builtins + lazy context views of
/// ctx.expression_context). Protected mode only.
void PushExpressionEnv(lua_State* L, Context& ctx);

// ---- convert.cc (see lua/convert.h for the public part) -------------------

/// True if `s` is valid UTF-8.
bool IsValidUtf8(std::string_view s);
/// Formats the number at `index` the way Lua's tostring does ("3", "1.5"),
/// without allocating in the Lua heap.
std::string FormatLuaNumber(lua_State* L, int index);
/// Creates the metatables of lazy JSON views. Protected mode only.
void CreateViewMetatables(lua_State* L, Context& ctx);
/// Parses JSON text for a script (accel.json.decode, fromjson). The parsed
/// tree lives in C++ before it is pushed, so it counts against the memory
/// cap: 16 bytes a value plus the bytes of strings and keys. Throws
/// std::runtime_error "<fn>: ..." for bad JSON, and for a tree over the cap
/// a message ending in "not enough memory" with ctx.memory_limit_hit set
/// (classified as out_of_memory).
nlohmann::json ParseJsonBounded(Context& ctx, std::string_view text, const char* fn);

}  // namespace accelopt::lua::detail
