// lua/expression.cc - `${{ }}` expressions: the `accel` table (shared part in
// accel_common.cc, plus status tests), lazy context globals, evaluation and
// syntax checking.
#include "lua/expression.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "lua/convert.h"
#include "lua/internal.h"

namespace accelopt::lua {

using detail::Context;
using detail::Trampoline;
using nlohmann::json;

namespace {

constexpr const char* kChunkName = "expression";

std::string Status(Context& ctx) {
  const json* context = ctx.expression_context;
  if (context != nullptr && context->is_object()) {
    auto it = context->find("__status");
    if (it != context->end() && it->is_string()) return it->get<std::string>();
  }
  return "success";
}

int Always(lua_State* L, Context&) {
  lua_pushboolean(L, 1);
  return 1;
}

template <const char* kStatus>
int StatusIs(lua_State* L, Context& ctx) {
  lua_pushboolean(L, Status(ctx) == kStatus);
  return 1;
}
constexpr char kSuccess[] = "success";
constexpr char kFailure[] = "failure";
constexpr char kCancelled[] = "cancelled";

/// __index of the expression _ENV (upvalue 1: builtins table). Context keys
/// win over builtins; `null` is nil; unknown names are errors.
int GlobalIndex(lua_State* L, Context& ctx) {
  const json* context = ctx.expression_context;
  if (lua_type(L, 2) == LUA_TSTRING) {
    size_t n = 0;
    const char* name = lua_tolstring(L, 2, &n);
    std::string key(name, n);
    if (key == "null" && !(context != nullptr && context->is_object() && context->contains(key))) {
      lua_pushnil(L);
      return 1;
    }
    if (context != nullptr && context->is_object() && key.rfind("__", 0) != 0) {
      auto it = context->find(key);
      if (it != context->end()) {
        PushJsonView(L, *it);
        return 1;
      }
    }
  }
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  std::string known;
  if (context != nullptr && context->is_object()) {
    int listed = 0;
    for (const auto& [key, value] : context->items()) {
      if (key.rfind("__", 0) == 0) continue;
      if (++listed > 20) {
        known += ", ...";
        break;
      }
      known += known.empty() ? "" : ", ";
      known += key;
    }
  }
  const char* name = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?";
  return luaL_error(L, "unknown name '%s' (the context has: %s)", name, known.empty() ? "nothing" : known.c_str());
}

/// Driver: stack: ud, chunk -> result
int RunExpression(lua_State* L, Context&) {
  lua_pushvalue(L, 2);
  lua_call(L, 0, 1);
  return 1;
}

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

/// Drops "expression:N: " prefixes of a message about an expression of
/// `lines` lines; with several lines they become "line N: ". Lua may report
/// the line of the closing parenthesis we add, which counts as the last line.
std::string StripChunkPrefix(std::string message, int lines) {
  const std::string prefix = std::string(kChunkName) + ":";
  size_t pos = 0;
  while ((pos = message.find(prefix, pos)) != std::string::npos) {
    size_t end = pos + prefix.size();
    size_t digits = end;
    while (digits < message.size() && message[digits] >= '0' && message[digits] <= '9') ++digits;
    if (digits == end || digits + 1 >= message.size() || message.compare(digits, 2, ": ") != 0) {
      pos = end;
      continue;
    }
    int line = std::min(std::atoi(message.substr(end, digits - end).c_str()), lines);
    std::string replacement = lines <= 1 ? "" : "line " + std::to_string(line) + ": ";
    message.replace(pos, digits + 2 - pos, replacement);
    pos += replacement.size();
  }
  return message;
}

int LineCount(std::string_view expression) {
  return 1 + static_cast<int>(std::count(expression.begin(), expression.end(), '\n'));
}

/// The compiler's message for `source`, or nullopt if it compiles.
std::optional<std::string> CompileError(const std::string& source, int lines) {
  Sandbox sandbox(kChunkName, kExpressionLimits, nullptr);
  lua_State* L = sandbox.state();
  std::string chunkname = std::string("=") + kChunkName;
  int status = luaL_loadbufferx(L, source.data(), source.size(), chunkname.c_str(), "t");
  if (status == LUA_OK) return std::nullopt;
  std::string message = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "cannot compile";
  lua_pop(L, 1);
  return StripChunkPrefix(message, lines);
}

}  // namespace

namespace detail {

void PushExpressionEnv(lua_State* L, Context&) {
  lua_newtable(L);  // builtins
  int builtins = lua_gettop(L);
  static const char* const kBase[] = {"tostring", "tonumber", "type", "pairs", "ipairs", "select", nullptr};
  lua_pushglobaltable(L);
  CopyFields(L, -1, builtins, kBase);
  lua_pop(L, 1);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  static const char* const kLibs[] = {LUA_STRLIBNAME, LUA_MATHLIBNAME, LUA_UTF8LIBNAME, LUA_TABLIBNAME, nullptr};
  CopyFields(L, -1, builtins, kLibs);
  lua_pop(L, 1);
  // The accel table: what stages have too (accel_common.cc), plus the status tests.
  lua_newtable(L);
  SetAccelCommon(L);
  static const luaL_Reg kStatus[] = {{"always", Trampoline<Always>},
                                     {"success", Trampoline<StatusIs<kSuccess>>},
                                     {"failure", Trampoline<StatusIs<kFailure>>},
                                     {"cancelled", Trampoline<StatusIs<kCancelled>>},
                                     {nullptr, nullptr}};
  luaL_setfuncs(L, kStatus, 0);
  // Short forms kept for pipelines written before `accel` existed in expressions:
  // the same functions under bare names (docs/lua-stages.md, "Expressions").
  static const char* const kShortForms[] = {"len", "contains", "join", "keys", "always",
                                            "success", "failure", "cancelled", nullptr};
  CopyFields(L, -1, builtins, kShortForms);
  lua_getfield(L, -1, "json");
  lua_getfield(L, -1, "encode");
  lua_setfield(L, builtins, "tojson");
  lua_getfield(L, -1, "decode");
  lua_setfield(L, builtins, "fromjson");
  lua_pop(L, 1);
  lua_setfield(L, builtins, "accel");

  lua_newtable(L);  // the _ENV proxy
  lua_createtable(L, 0, 3);
  lua_pushvalue(L, builtins);
  lua_pushcclosure(L, Trampoline<GlobalIndex>, 1);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, ReadOnlyNewIndex);
  lua_setfield(L, -2, "__newindex");
  lua_pushliteral(L, "globals");
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  lua_remove(L, builtins);
}

}  // namespace detail

std::optional<std::string> CheckExpressionSyntax(std::string_view expression) {
  if (Trim(expression).empty()) return std::string("empty expression");
  // "\n)" so that a trailing `--` comment cannot swallow the parenthesis.
  if (!CompileError("return (" + std::string(expression) + "\n)", LineCount(expression))) return std::nullopt;
  // Compile without the parentheses for a message that matches what the
  // author wrote (no phantom ')').
  if (auto message = CompileError("return " + std::string(expression), LineCount(expression))) return message;
  return std::string("not a single expression");
}

json EvaluateExpression(std::string_view expression, const json& context, const Limits& limits, const HostHooks* hooks) {
  if (Trim(expression).empty()) throw LuaError("syntax_error", "empty expression");
  HostHooks cancel_only;
  if (hooks != nullptr) cancel_only.cancelled = hooks->cancelled;
  Sandbox sandbox(kChunkName, limits, &cancel_only);
  lua_State* L = sandbox.state();
  try {
    sandbox.OpenExpressionEnv(context);
    try {
      // "\n)" so that a trailing `--` comment cannot swallow the parenthesis.
      sandbox.LoadChunk("return (" + std::string(expression) + "\n)");
    } catch (const LuaError& e) {
      if (e.kind != "syntax_error") throw;
      std::string problem =
          CheckExpressionSyntax(expression).value_or(StripChunkPrefix(e.what(), LineCount(expression)));
      throw LuaError("syntax_error", problem);
    }
    sandbox.Call(Trampoline<RunExpression>, nullptr, 1, 1);
    return ToJson(L, -1, "result");
  } catch (const LuaError& e) {
    throw LuaError(e.kind, StripChunkPrefix(e.what(), LineCount(expression)), "", e.traceback, e.details);
  }
}

}  // namespace accelopt::lua
