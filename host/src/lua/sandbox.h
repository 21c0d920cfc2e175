// lua/sandbox.h - public types of the Lua 5.4 sandbox and the per-call state
// factory behind Lua stages (lua/stage_script.h) and `${{ }}` expressions
// (lua/expression.h).
//
// Every call gets a fresh lua_State with a capped allocator, a deadline hook
// and a read-only environment built from an allow-list (docs/lua-stages.md, "What is available").
// The library is Debian's C++ build of Lua (`lua5.4-c++`): Lua errors are C++
// exceptions, so no code here may `catch (...)` around Lua calls, and every C
// function exported to Lua goes through a trampoline that catches only
// std::exception.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

struct lua_State;

namespace accelopt::lua {

/// Resource limits of one Lua call (one fresh lua_State).
struct Limits {
  /// Cap on the Lua heap of the state, in bytes. An allocation that would grow
  /// the heap beyond it fails, and the call ends with kind "out_of_memory".
  /// Values <= 0 mean "no cap".
  int64_t memory_bytes = 64ll << 20;
  /// Wall-clock budget of the whole call (state setup, compile, run), in
  /// milliseconds; exceeding it ends the call with kind "timeout". Values <= 0
  /// mean "no deadline". Checked every few thousand VM instructions, so a
  /// single long-running C function (e.g. a pathological string.find) is only
  /// stopped when it returns.
  std::chrono::milliseconds timeout{10000};
};

/// Default limits of `${{ }}` expressions: 16 MiB of Lua heap, 1000 ms.
inline constexpr Limits kExpressionLimits{16ll << 20, std::chrono::milliseconds(1000)};

/// A failed Lua call. what() is a complete one-line message, e.g.
/// "filter.lua:12: attempt to index a nil value (local 'x')".
struct LuaError : std::runtime_error {
  /// Builds an error; `message` becomes what().
  LuaError(std::string kind_in, const std::string& message, std::string location_in = {},
           std::string traceback_in = {}, nlohmann::json details_in = nullptr);

  /// One of: "syntax_error" (the chunk or expression does not compile),
  /// "script_error" (a runtime error, or the script breaks the stage contract),
  /// "timeout" (Limits::timeout exceeded), "cancelled" (HostHooks::cancelled
  /// returned true), "out_of_memory" (Limits::memory_bytes exceeded),
  /// "stage_failure" (the script called accel.fail) or "bad_output" (the
  /// result cannot be converted to JSON).
  std::string kind;
  /// "file.lua:LINE" of the failing line where known, otherwise "".
  std::string location;
  /// Lua traceback ("stack traceback:\n\t...") where known, otherwise "".
  std::string traceback;
  /// For "stage_failure": {"kind": <script's kind>, "message": <script's
  /// message>, "details": <script's details or null>}. Otherwise null.
  nlohmann::json details;
};

/// Services the host lends to a running Lua stage. Every member is optional.
struct HostHooks {
  /// Receives accel.log/info/warn/error and print output. Levels follow
  /// spdlog: 0 trace, 1 debug, 2 info, 3 warn, 4 error. Unset: dropped.
  std::function<void(int level, const std::string&)> log;
  /// accel.fs.read/exists/list resolve relative paths below this directory
  /// (the run directory). Empty: those functions raise an error.
  std::filesystem::path read_root;
  /// accel.fs.write resolves relative paths below this directory (the stage
  /// directory). Empty: accel.fs.write raises an error.
  std::filesystem::path write_root;
  /// Polled by the deadline hook (every few thousand instructions); returning
  /// true stops the script like a timeout, with kind "cancelled".
  std::function<bool()> cancelled;
};

namespace detail {
struct Context;
}

/// One fresh, sandboxed lua_State (the state factory). Most callers want
/// RunStage, LoadStageInfo or EvaluateExpression instead.
///
/// The constructor creates the state with the capped allocator and arms the
/// deadline (the clock starts here). OpenStageEnv/OpenExpressionEnv open the
/// allowed libraries and build the read-only `_ENV`; LoadChunk compiles text
/// (never bytecode) with that `_ENV`; Call runs a C function in protected mode
/// under the traceback message handler and turns failures into LuaError.
class Sandbox {
 public:
  /// `chunk_name` is the short name used in messages ("filter.lua").
  /// `hooks` may be null and must outlive the sandbox.
  /// Throws LuaError("out_of_memory") if the state cannot be created.
  Sandbox(std::string chunk_name, const Limits& limits, const HostHooks* hooks);
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  /// The raw state (single-threaded; never share it across threads).
  lua_State* state() const { return L_; }
  /// Internal per-state bookkeeping (lua/internal.h).
  detail::Context& context() const { return *ctx_; }

  /// Opens base/table/string/math/utf8/coroutine and installs the stage
  /// environment (safe base functions + `accel`). Throws LuaError.
  void OpenStageEnv();
  /// Opens the libraries and installs the expression environment: builtins
  /// plus each key of `context` as a lazy read-only global. `context` must
  /// outlive the sandbox. Throws LuaError.
  void OpenExpressionEnv(const nlohmann::json& context);

  /// Compiles `source` as a text chunk named "=<chunk_name>" and pushes the
  /// function with the sandbox `_ENV`. Throws LuaError("syntax_error") with
  /// location "<chunk_name>:LINE", or "out_of_memory".
  void LoadChunk(std::string_view source);

  /// Calls `fn(ud, args...)` in protected mode: pops the top `nargs` values,
  /// pushes `nresults` results. On failure the stack is restored to below the
  /// arguments and a classified LuaError is thrown.
  void Call(int (*fn)(lua_State*), void* ud, int nargs, int nresults);

  /// Builds the LuaError for a failed call of this state from `status`
  /// (LUA_ERR*) and what the message handler captured.
  LuaError ErrorFromStatus(int status);

 private:
  lua_State* L_ = nullptr;
  std::unique_ptr<detail::Context> ctx_;
};

}  // namespace accelopt::lua
