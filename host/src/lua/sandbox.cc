// lua/sandbox.cc - the per-call state factory: capped allocator, deadline
// hook, allowed libraries, read-only _ENV, traceback message handler and the
// classification of failures into LuaError kinds.
#include "lua/sandbox.h"

#include <cstdlib>
#include <cstring>

#include "lua/convert.h"
#include "lua/internal.h"

namespace accelopt::lua {

using detail::Context;
using detail::ContextOf;
using nlohmann::json;

LuaError::LuaError(std::string kind_in, const std::string& message, std::string location_in,
                   std::string traceback_in, json details_in)
    : std::runtime_error(message),
      kind(std::move(kind_in)),
      location(std::move(location_in)),
      traceback(std::move(traceback_in)),
      details(std::move(details_in)) {}

namespace {

/// VM instructions between two deadline checks (about 10 us of work).
constexpr int kHookPeriod = 1000;
/// Extra heap granted once to the message handler so that an error raised at
/// the memory cap can still be formatted (traceback) instead of turning into
/// "error in error handling".
constexpr size_t kErrorSlackBytes = 1u << 20;

// ---- allocator --------------------------------------------------------------

/// lua_Alloc that refuses growth beyond Context::limit_bytes. Frees and
/// shrinks always succeed. When ptr is NULL, osize encodes the object type,
/// not a size (Lua 5.4 manual §4.6), so it counts as 0.
void* LimitedAlloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  auto* ctx = static_cast<Context*>(ud);
  size_t old_size = ptr != nullptr ? osize : 0;
  if (nsize == 0) {
    std::free(ptr);
    ctx->used_bytes -= old_size;
    return nullptr;
  }
  if (nsize > old_size) {
    size_t growth = nsize - old_size;
    if (growth > ctx->limit_bytes || ctx->used_bytes > ctx->limit_bytes - growth) {
      ctx->memory_limit_hit = true;
      return nullptr;  // Lua collects garbage, retries, then raises LUA_ERRMEM
    }
  }
  void* block = std::realloc(ptr, nsize);
  if (block == nullptr) return nullptr;
  ctx->used_bytes = ctx->used_bytes - old_size + nsize;
  return block;
}

// ---- deadline hook ----------------------------------------------------------

bool PollCancelled(Context& ctx) {
  if (ctx.hooks == nullptr || !ctx.hooks->cancelled) return false;
  try {
    return ctx.hooks->cancelled();
  } catch (const std::exception&) {
    return false;  // a broken cancel callback must not kill the script
  }
}

/// Count hook. Once the deadline passed (or the host cancelled), it re-arms
/// itself to fire on every instruction of this thread and raises; a script's
/// own pcall can catch one raise but not the next one (Redis' mask-count hook
/// idea). Coroutines inherit the hook when created and hit the same flags.
void DeadlineHook(lua_State* L, lua_Debug*) {
  Context& ctx = ContextOf(L);
  if (!ctx.timed_out && !ctx.cancelled) {
    if (ctx.has_deadline && std::chrono::steady_clock::now() >= ctx.deadline) {
      ctx.timed_out = true;
    } else if (PollCancelled(ctx)) {
      ctx.cancelled = true;
    } else {
      return;
    }
  }
  lua_sethook(L, DeadlineHook, LUA_MASKCOUNT, 1);
  if (ctx.timed_out) {
    lua_pushfstring(L, "timed out after %d ms", static_cast<int>(ctx.timeout.count()));
  } else {
    lua_pushstring(L, "cancelled");
  }
  lua_error(L);
}

// ---- message handler --------------------------------------------------------

std::string StringAt(lua_State* L, int index) {
  size_t n = 0;
  const char* s = lua_tolstring(L, index, &n);
  return s != nullptr ? std::string(s, n) : std::string();
}

/// Records message, location, traceback and accel.fail data of the error at
/// index 1 into ctx.error.
void CaptureError(lua_State* L, Context& ctx) {
  detail::CapturedError& err = ctx.error;
  err = {};
  err.captured = true;

  // Location: the innermost frame with line information (the raise point;
  // level 0 is this handler).
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar) != 0; ++level) {
    if (lua_getinfo(L, "Sl", &ar) != 0 && ar.currentline > 0) {
      err.location = std::string(ar.short_src) + ":" + std::to_string(ar.currentline);
      break;
    }
  }
  luaL_traceback(L, L, nullptr, 1);
  err.traceback = StringAt(L, -1);
  lua_pop(L, 1);

  int type = lua_type(L, 1);
  if (type == LUA_TSTRING) {
    err.message = StringAt(L, 1);
    return;
  }
  if (type == LUA_TNUMBER) {
    err.message = detail::FormatLuaNumber(L, 1);
    return;
  }
  if (type == LUA_TTABLE && lua_getmetatable(L, 1) != 0) {
    bool is_failure = lua_topointer(L, -1) == ctx.fail_mt;
    lua_pop(L, 1);
    if (is_failure) {
      err.is_failure = true;
      lua_getfield(L, 1, "kind");
      err.failure_kind = StringAt(L, -1);
      lua_getfield(L, 1, "message");
      err.failure_message = StringAt(L, -1);
      lua_getfield(L, 1, "details");
      try {
        err.failure_details = ToJson(L, -1, "details");
      } catch (const LuaError& e) {
        err.failure_details = {{"unconvertible", e.what()}};
      }
      lua_pop(L, 3);
      err.message = err.failure_kind + ": " + err.failure_message;
      return;
    }
  }
  if (luaL_callmeta(L, 1, "__tostring") != 0 && lua_type(L, -1) == LUA_TSTRING) {
    err.message = StringAt(L, -1);
    return;
  }
  if (type == LUA_TTABLE) {
    try {
      err.message = "error object: " + ToJson(L, 1, "error").dump();
      return;
    } catch (const LuaError&) {
    }
  }
  err.message = std::string("(error object is a ") + luaL_typename(L, 1) + " value)";
}

int MessageHandler(lua_State* L) {
  Context& ctx = ContextOf(L);
  if (!ctx.error_slack_given) {
    ctx.error_slack_given = true;
    if (ctx.limit_bytes <= static_cast<size_t>(-1) - kErrorSlackBytes) ctx.limit_bytes += kErrorSlackBytes;
  }
  std::string problem;
  try {
    CaptureError(L, ctx);
  } catch (const std::exception& e) {
    problem = e.what();
  }
  if (!problem.empty()) ctx.error.message += " (while formatting the error: " + problem + ")";
  lua_settop(L, 1);
  return 1;  // the original error object
}

/// Panic function: an error escaped protected mode (a bug here). Turn it into
/// a C++ exception instead of abort(); the state is closed right after.
int Panic(lua_State* L) {
  std::string message = lua_type(L, -1) == LUA_TSTRING ? StringAt(L, -1) : "unknown error";
  throw LuaError("script_error", "unprotected Lua error: " + message);
}

/// "name.lua:12" if `message` starts with "name.lua:12: ", else "".
std::string LocationPrefix(const std::string& message) {
  size_t colon = message.find(':');
  while (colon != std::string::npos && colon > 0) {
    size_t end = colon + 1;
    while (end < message.size() && message[end] >= '0' && message[end] <= '9') ++end;
    if (end > colon + 1 && end < message.size() && message[end] == ':') return message.substr(0, end);
    if (message.find('\n') < colon) break;
    colon = message.find(':', colon + 1);
  }
  return "";
}

int NullToString(lua_State* L) {
  lua_pushliteral(L, "null");
  return 1;
}

int FailToString(lua_State* L) {
  lua_getfield(L, 1, "kind");
  lua_getfield(L, 1, "message");
  lua_pushfstring(L, "%s: %s", luaL_optstring(L, -2, "?"), luaL_optstring(L, -1, ""));
  return 1;
}

/// setmetatable without finalizers: Lua runs __gc with hooks disabled, so a
/// looping finalizer could never be stopped. Lua marks an object for
/// finalization only if its metatable has __gc when set, so checking here
/// suffices.
int SafeSetMetatable(lua_State* L, Context&) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int t = lua_type(L, 2);
  luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
  if (t == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    if (lua_rawget(L, 2) != LUA_TNIL) return luaL_error(L, "__gc metamethods are not allowed in the sandbox");
    lua_pop(L, 1);
  }
  if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL) return luaL_error(L, "cannot change a protected metatable");
  lua_settop(L, 2);
  lua_setmetatable(L, 1);
  return 1;
}

// A Lua error raised from the deadline hook runs with hooks disabled until
// the enclosing pcall unwinds (Lua sets allowhook = 0 around hooks). Two
// consequences are closed here:
//  * a stock xpcall handler would run unhookable at that moment, so xpcall
//    calls the handler after unwinding (same results: the sandbox has no
//    debug library, so the handler cannot inspect the failing stack anyway);
//  * a coroutine killed by the hook keeps hooks disabled, so coroutine.close
//    (which runs its pending __close handlers) is refused once the deadline
//    passed.

int XpcallContinue(lua_State* L, int status, lua_KContext) {
  // stack: f handler true results...   or   f handler true error
  if (status != LUA_OK && status != LUA_YIELD) {
    lua_pushboolean(L, 0);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, -3);
    lua_pcall(L, 1, 1, 0);  // a failing handler yields its own error, like Lua's LUA_ERRERR
    return 2;               // false, handler(error)
  }
  return lua_gettop(L) - 2;  // true, results...
}

int SafeXpcall(lua_State* L) {
  int n = lua_gettop(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushboolean(L, 1);
  lua_pushvalue(L, 1);
  lua_rotate(L, 3, 2);  // stack: f handler true f args...
  int status = lua_pcallk(L, n - 2, LUA_MULTRET, 0, 0, XpcallContinue);
  return XpcallContinue(L, status, 0);
}

int SafeCoroutineClose(lua_State* L, Context& ctx) {
  if (ctx.timed_out || ctx.cancelled) return luaL_error(L, ctx.timed_out ? "timed out" : "cancelled");
  int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

// Stage environment (see docs/lua-stages.md for the list).
int SetupStage(lua_State* L, Context& ctx) {
  detail::OpenBaseObjects(L, ctx);
  lua_newtable(L);  // env
  int env = lua_gettop(L);
  static const char* const kBase[] = {"assert", "error",    "ipairs",   "next", "pairs",    "pcall",
                                      "select", "tonumber", "tostring", "type", "_VERSION", "getmetatable",
                                      nullptr};
  lua_pushglobaltable(L);
  detail::CopyFields(L, -1, env, kBase);
  lua_pop(L, 1);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  static const char* const kLibs[] = {LUA_TABLIBNAME, LUA_STRLIBNAME, LUA_MATHLIBNAME, LUA_UTF8LIBNAME,
                                      LUA_COLIBNAME, nullptr};
  detail::CopyFields(L, -1, env, kLibs);
  lua_pop(L, 1);
  lua_pushcfunction(L, detail::Trampoline<SafeSetMetatable>);
  lua_setfield(L, env, "setmetatable");
  lua_pushcfunction(L, SafeXpcall);
  lua_setfield(L, env, "xpcall");
  lua_getfield(L, env, LUA_COLIBNAME);
  lua_getfield(L, -1, "close");
  lua_pushcclosure(L, detail::Trampoline<SafeCoroutineClose>, 1);
  lua_setfield(L, -2, "close");
  lua_pop(L, 1);
  lua_pushcfunction(L, detail::Trampoline<detail::SafeLoad>);
  lua_setfield(L, env, "load");
  lua_pushcfunction(L, detail::LuaPrint);
  lua_setfield(L, env, "print");
  detail::PushAccelTable(L);
  lua_setfield(L, env, "accel");

  detail::PushReadOnlyProxy(L, env);
  lua_pushvalue(L, -1);
  lua_setfield(L, env, "_G");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &detail::kEnvKey);
  lua_settop(L, 0);
  return 0;
}

int SetupExpression(lua_State* L, Context& ctx) {
  detail::OpenBaseObjects(L, ctx);
  detail::PushExpressionEnv(L, ctx);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &detail::kEnvKey);
  lua_settop(L, 0);
  return 0;
}

}  // namespace

// ---- detail helpers ---------------------------------------------------------

namespace detail {

bool DeadlineReached(lua_State* L, Context& ctx) {
  if (!ctx.timed_out && !ctx.cancelled) {
    if (ctx.has_deadline && std::chrono::steady_clock::now() >= ctx.deadline) {
      ctx.timed_out = true;
    } else if (PollCancelled(ctx)) {
      ctx.cancelled = true;
    } else {
      return false;
    }
  }
  lua_sethook(L, DeadlineHook, LUA_MASKCOUNT, 1);  // as the hook does: every instruction raises from now on
  return true;
}

void CopyFields(lua_State* L, int from_index, int to_index, const char* const* names) {
  from_index = lua_absindex(L, from_index);
  to_index = lua_absindex(L, to_index);
  for (; *names != nullptr; ++names) {
    if (lua_getfield(L, from_index, *names) == LUA_TNIL) {
      lua_pop(L, 1);
      continue;
    }
    lua_setfield(L, to_index, *names);
  }
}

void OpenBaseObjects(lua_State* L, Context& ctx) {
  static const luaL_Reg kLibs[] = {{LUA_GNAME, luaopen_base},         {LUA_TABLIBNAME, luaopen_table},
                                   {LUA_STRLIBNAME, luaopen_string},  {LUA_MATHLIBNAME, luaopen_math},
                                   {LUA_UTF8LIBNAME, luaopen_utf8},   {LUA_COLIBNAME, luaopen_coroutine},
                                   {nullptr, nullptr}};
  for (const luaL_Reg* lib = kLibs; lib->func != nullptr; ++lib) {
    luaL_requiref(L, lib->name, lib->func, 0);
    lua_pop(L, 1);
  }
  // string.dump would hand out bytecode; the string table is also the
  // __index of the string metatable, which we protect from getmetatable.
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, LUA_STRLIBNAME);
  lua_pushnil(L);
  lua_setfield(L, -2, "dump");
  lua_pop(L, 2);
  // find/match/gmatch/gsub that stop at the deadline (lua/pattern.cc).
  InstallBoundedPatterns(L);
  // string.rep and table.insert/remove/move that stop at the budgets (lua/bounded_lib.cc).
  InstallBoundedLibs(L);
  lua_pushliteral(L, "");
  if (lua_getmetatable(L, -1) != 0) {
    lua_pushliteral(L, "string");
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);

  // Marker metatables. Protected so that scripts cannot add __gc (or other
  // metamethods) to tables the host marks later.
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "accel.array");
  lua_setfield(L, -2, "__metatable");
  ctx.array_mt = lua_topointer(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kArrayMtKey);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "accel.object");
  lua_setfield(L, -2, "__metatable");
  ctx.object_mt = lua_topointer(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kObjectMtKey);

  // accel.null: one userdata per state.
  lua_newuserdatauv(L, 1, 0);
  lua_createtable(L, 0, 3);
  lua_pushliteral(L, "null");
  lua_setfield(L, -2, "__name");
  lua_pushliteral(L, "null");
  lua_setfield(L, -2, "__metatable");
  lua_pushcfunction(L, NullToString);
  lua_setfield(L, -2, "__tostring");
  lua_setmetatable(L, -2);
  ctx.null_value = lua_touserdata(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kNullKey);

  // accel.fail error objects.
  lua_createtable(L, 0, 3);
  lua_pushliteral(L, "accel.failure");
  lua_setfield(L, -2, "__name");
  lua_pushliteral(L, "accel.failure");
  lua_setfield(L, -2, "__metatable");
  lua_pushcfunction(L, FailToString);
  lua_setfield(L, -2, "__tostring");
  ctx.fail_mt = lua_topointer(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kFailMtKey);

  CreateViewMetatables(L, ctx);
}

void PushReadOnlyProxy(lua_State* L, int env_index) {
  env_index = lua_absindex(L, env_index);
  lua_newtable(L);  // proxy
  lua_createtable(L, 0, 3);
  lua_pushvalue(L, env_index);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, detail::ReadOnlyNewIndex);
  lua_setfield(L, -2, "__newindex");
  lua_pushliteral(L, "globals");
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
}

int ReadOnlyNewIndex(lua_State* L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    return luaL_error(L, "cannot assign to global '%s': globals are read-only (use local)", lua_tostring(L, 2));
  }
  return luaL_error(L, "cannot assign to a global: globals are read-only (use local)");
}

int SafeLoad(lua_State* L, Context&) {
  if (lua_type(L, 1) != LUA_TSTRING) {
    return luaL_error(L, "load: only string chunks are allowed in the sandbox");
  }
  size_t n = 0;
  const char* source = lua_tolstring(L, 1, &n);
  const char* name = luaL_optstring(L, 2, "=(load)");
  bool has_env = !lua_isnone(L, 4);
  // Mode is always "t": precompiled bytecode can crash the VM.
  if (luaL_loadbufferx(L, source, n, name, "t") != LUA_OK) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;  // nil, message (like the stock load)
  }
  if (has_env) {
    lua_pushvalue(L, 4);
  } else {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &kEnvKey);
  }
  if (lua_setupvalue(L, -2, 1) == nullptr) lua_pop(L, 1);
  return 1;
}

}  // namespace detail

// ---- Sandbox ----------------------------------------------------------------

Sandbox::Sandbox(std::string chunk_name, const Limits& limits, const HostHooks* hooks)
    : ctx_(std::make_unique<Context>()) {
  Context& ctx = *ctx_;
  ctx.chunk_name = std::move(chunk_name);
  ctx.limits = limits;
  ctx.hooks = hooks;
  if (limits.memory_bytes > 0) ctx.limit_bytes = static_cast<size_t>(limits.memory_bytes);
  L_ = lua_newstate(LimitedAlloc, &ctx);
  if (L_ == nullptr) {
    throw LuaError("out_of_memory", ctx.chunk_name + ": cannot create a Lua state within " +
                                        std::to_string(limits.memory_bytes) + " bytes");
  }
  lua_atpanic(L_, Panic);
  if (limits.timeout.count() > 0) {
    ctx.has_deadline = true;
    ctx.timeout = limits.timeout;
    ctx.deadline = std::chrono::steady_clock::now() + limits.timeout;
  }
  if (ctx.has_deadline || (hooks != nullptr && hooks->cancelled)) {
    lua_sethook(L_, DeadlineHook, LUA_MASKCOUNT, kHookPeriod);
  }
}

Sandbox::~Sandbox() {
  if (L_ == nullptr) return;
  // Pending __close handlers run during lua_close; stop any Lua code at once.
  ctx_->has_deadline = true;
  ctx_->deadline = std::chrono::steady_clock::time_point::min();
  ctx_->hooks = nullptr;
  lua_sethook(L_, DeadlineHook, LUA_MASKCOUNT, 1);
  lua_close(L_);
}

void Sandbox::OpenStageEnv() { Call(detail::Trampoline<SetupStage>, nullptr, 0, 0); }

void Sandbox::OpenExpressionEnv(const json& context) {
  ctx_->expression_context = &context;
  Call(detail::Trampoline<SetupExpression>, nullptr, 0, 0);
}

void Sandbox::LoadChunk(std::string_view source) {
  std::string text(source);
  // Skip a UTF-8 BOM and a "#!" first line (kept as an empty line so that
  // line numbers stay right), as lua.c does for files.
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  if (!text.empty() && text[0] == '#') text.erase(0, text.find('\n') == std::string::npos ? text.size() : text.find('\n'));
  std::string chunkname = "=" + ctx_->chunk_name;
  int status = luaL_loadbufferx(L_, text.data(), text.size(), chunkname.c_str(), "t");
  if (status != LUA_OK) {
    std::string message = lua_type(L_, -1) == LUA_TSTRING ? StringAt(L_, -1) : "cannot load chunk";
    lua_pop(L_, 1);
    if (status == LUA_ERRMEM) {
      throw LuaError("out_of_memory", ctx_->chunk_name + ": out of memory while compiling (limit " +
                                          std::to_string(ctx_->limits.memory_bytes) + " bytes)");
    }
    throw LuaError("syntax_error", message, LocationPrefix(message));
  }
  lua_rawgetp(L_, LUA_REGISTRYINDEX, &detail::kEnvKey);
  if (lua_setupvalue(L_, -2, 1) == nullptr) lua_pop(L_, 1);
}

void Sandbox::Call(int (*fn)(lua_State*), void* ud, int nargs, int nresults) {
  lua_State* L = L_;
  int base = lua_gettop(L) - nargs;
  ctx_->error = {};
  if (!lua_checkstack(L, 3)) {
    throw LuaError("out_of_memory", ctx_->chunk_name + ": out of memory (Lua stack)");
  }
  lua_pushcfunction(L, MessageHandler);
  lua_pushcfunction(L, fn);
  lua_pushlightuserdata(L, ud);
  lua_rotate(L, base + 1, 3);  // stack: msgh fn ud args...
  int status = lua_pcall(L, nargs + 1, nresults, base + 1);
  if (status != LUA_OK) {
    LuaError error = ErrorFromStatus(status);
    lua_settop(L, base);
    throw error;
  }
  lua_remove(L, base + 1);  // the message handler
}

LuaError Sandbox::ErrorFromStatus(int status) {
  Context& ctx = *ctx_;
  const detail::CapturedError& err = ctx.error;
  std::string message = err.captured ? err.message
                        : lua_type(L_, -1) == LUA_TSTRING ? StringAt(L_, -1)
                                                          : std::string("unknown error");
  std::string location = LocationPrefix(message);
  if (location.empty()) location = err.location;
  auto with_location = [&](const std::string& text) {
    if (location.empty() || !LocationPrefix(text).empty()) return text;
    return location + ": " + text;
  };

  if (ctx.timed_out) {
    return LuaError("timeout",
                    with_location("timed out after " + std::to_string(ctx.timeout.count()) + " ms"), location,
                    err.traceback);
  }
  if (ctx.cancelled) return LuaError("cancelled", with_location("cancelled"), location, err.traceback);
  bool oom_message = message.size() >= 17 && message.compare(message.size() - 17, 17, "not enough memory") == 0;
  if (status == LUA_ERRMEM || (ctx.memory_limit_hit && (status == LUA_ERRERR || oom_message))) {
    return LuaError("out_of_memory",
                    ctx.chunk_name + ": out of memory (limit " + std::to_string(ctx.limits.memory_bytes) + " bytes)" +
                        (ctx.memory_detail.empty() ? std::string() : ": " + ctx.memory_detail),
                    location, err.traceback);
  }
  if (err.is_failure) {
    return LuaError("stage_failure", with_location(err.failure_kind + ": " + err.failure_message), location,
                    err.traceback,
                    json{{"kind", err.failure_kind}, {"message", err.failure_message}, {"details", err.failure_details}});
  }
  if (status == LUA_ERRERR) message = "error in error handling: " + message;
  return LuaError("script_error", with_location(message), location, err.traceback);
}

}  // namespace accelopt::lua
