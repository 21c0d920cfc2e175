// lua/stage_script.cc - loading and running Lua stage scripts.
#include "lua/stage_script.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "core/bounded_file.h"
#include "lua/convert.h"
#include "lua/internal.h"

namespace accelopt::lua {

using detail::Context;
using detail::Trampoline;
using nlohmann::json;

namespace {

/// Largest Lua stage script read, in bytes (4 MiB).
constexpr std::uintmax_t kMaxScriptBytes = 4u << 20;

/// A regular file of at most kMaxScriptBytes (never /dev/zero or a FIFO).
std::string ReadScript(const std::filesystem::path& script) {
  try {
    return ReadRegularFile(script, kMaxScriptBytes, "Lua stage scripts");
  } catch (const std::runtime_error& error) {
    throw LuaError("script_error", "cannot read Lua stage script '" + script.string() + "': " + error.what());
  }
}

/// Calls the chunk at index 2 and leaves its `run` function at index 3 and
/// the script table (or nil for the function form) at index 4.
void CallChunk(lua_State* L, Context& ctx) {
  lua_settop(L, 2);
  lua_pushvalue(L, 2);
  lua_call(L, 0, 1);  // stack: ud chunk result
  if (lua_type(L, 3) == LUA_TFUNCTION) {
    lua_pushnil(L);
    return;
  }
  if (lua_type(L, 3) != LUA_TTABLE) {
    luaL_error(L,
               "%s: the script must return a table {description = ..., params = ..., run = function(input) ... end}"
               " (it returned %s)",
               ctx.chunk_name.c_str(), luaL_typename(L, 3));
  }
  lua_getfield(L, 3, "run");
  if (lua_type(L, -1) != LUA_TFUNCTION) {
    luaL_error(L, "%s: the returned table has no 'run' function (run is %s)", ctx.chunk_name.c_str(),
               luaL_typename(L, -1));
  }
  lua_insert(L, 3);  // stack: ud chunk run table
}

/// Driver: stack: ud, chunk -> description, params, outputs
int InfoDriver(lua_State* L, Context& ctx) {
  CallChunk(L, ctx);
  if (lua_isnil(L, 4)) {
    lua_pushnil(L);
    lua_pushnil(L);
    lua_pushnil(L);
    return 3;
  }
  int description_type = lua_getfield(L, 4, "description");
  if (description_type != LUA_TNIL && description_type != LUA_TSTRING) {
    luaL_error(L, "%s: 'description' must be a string (it is %s)", ctx.chunk_name.c_str(), luaL_typename(L, -1));
  }
  int params_type = lua_getfield(L, 4, "params");
  if (params_type != LUA_TNIL && params_type != LUA_TTABLE) {
    luaL_error(L, "%s: 'params' must be a table (it is %s)", ctx.chunk_name.c_str(), luaL_typename(L, -1));
  }
  int outputs_type = lua_getfield(L, 4, "outputs");
  if (outputs_type != LUA_TNIL && outputs_type != LUA_TTABLE) {
    luaL_error(L, "%s: 'outputs' must be a table (it is %s)", ctx.chunk_name.c_str(), luaL_typename(L, -1));
  }
  return 3;
}

/// Driver: stack: ud (the input json), chunk -> outputs
int RunDriver(lua_State* L, Context& ctx) {
  const auto* input = static_cast<const json*>(lua_touserdata(L, 1));
  CallChunk(L, ctx);
  lua_settop(L, 3);  // run
  PushJson(L, *input);
  lua_call(L, 1, 1);
  return 1;
}

void ValidateParams(const json& params, const std::string& chunk) {
  static const std::set<std::string> kTypes = {"string", "integer", "number", "boolean", "array", "object", "any"};
  auto fail = [&](const std::string& where, const std::string& what) {
    throw LuaError("script_error", chunk + ": params." + where + ": " + what);
  };
  if (!params.is_object()) throw LuaError("script_error", chunk + ": 'params' must be a table of parameters by name");
  for (const auto& [name, spec] : params.items()) {
    if (!spec.is_object()) fail(name, "must be a table {type = ..., required = ..., default = ..., doc = ...}");
    for (const auto& [field, value] : spec.items()) {
      if (field == "type") {
        if (!value.is_string() || !kTypes.count(value.get<std::string>())) {
          fail(name + ".type", "must be one of string, integer, number, boolean, array, object, any");
        }
      } else if (field == "required") {
        if (!value.is_boolean()) fail(name + ".required", "must be a boolean");
      } else if (field == "doc") {
        if (!value.is_string()) fail(name + ".doc", "must be a string");
      } else if (field == "enum") {
        if (!value.is_array() || value.empty()) fail(name + ".enum", "must be a non-empty list of the allowed values");
      } else if (field != "default" && field != "minimum" && field != "maximum" && field != "path" && field != "keys_of") {
        // minimum/maximum/path/keys_of: their shape is checked by CheckSchema (plugin/lua_stage.cc).
        fail(name + "." + field, "unknown field (expected type, required, default, doc, enum, minimum, maximum, path, keys_of)");
      }
    }
  }
}

std::string ChunkNameOf(const std::filesystem::path& script) { return script.filename().string(); }

}  // namespace

StageScriptInfo LoadStageInfoFromSource(std::string_view source, const std::string& chunk_name, const Limits& limits) {
  Sandbox sandbox(chunk_name, limits, nullptr);
  lua_State* L = sandbox.state();
  sandbox.OpenStageEnv();
  sandbox.LoadChunk(source);
  sandbox.Call(Trampoline<InfoDriver>, nullptr, 1, 3);
  StageScriptInfo info;
  if (lua_type(L, -3) == LUA_TSTRING) {
    size_t n = 0;
    const char* s = lua_tolstring(L, -3, &n);
    info.description.assign(s, n);
  }
  if (!lua_isnil(L, -1)) {
    try {
      info.outputs = ToJson(L, -1, "outputs");
    } catch (const LuaError& e) {
      throw LuaError("script_error", chunk_name + ": " + e.what());
    }
    if (!info.outputs.is_object()) throw LuaError("script_error", chunk_name + ": 'outputs' must be a table of output fields by name");
  }
  if (!lua_isnil(L, -2)) {
    try {
      info.params = ToJson(L, -2, "params");
    } catch (const LuaError& e) {
      throw LuaError("script_error", chunk_name + ": " + e.what());
    }
    ValidateParams(info.params, chunk_name);
  }
  return info;
}

json RunStageFromSource(std::string_view source, const std::string& chunk_name, const json& input,
                        const HostHooks& hooks, const Limits& limits) {
  Sandbox sandbox(chunk_name, limits, &hooks);
  lua_State* L = sandbox.state();
  sandbox.OpenStageEnv();
  sandbox.LoadChunk(source);
  sandbox.Call(Trampoline<RunDriver>, const_cast<json*>(&input), 1, 1);
  if (lua_isnil(L, -1)) return json::object();
  try {
    return ToJson(L, -1, "outputs");
  } catch (const LuaError& e) {
    if (e.kind == "out_of_memory") {
      throw LuaError("out_of_memory", chunk_name + ": out of memory (limit " + std::to_string(limits.memory_bytes) +
                                          " bytes) while converting run()'s result: " + e.what());
    }
    throw LuaError("bad_output", chunk_name + ": run() returned a value that is not JSON: " + e.what());
  }
}

StageScriptInfo LoadStageInfo(const std::filesystem::path& script, const Limits& limits) {
  return LoadStageInfoFromSource(ReadScript(script), ChunkNameOf(script), limits);
}

json RunStage(const std::filesystem::path& script, const json& input, const HostHooks& hooks, const Limits& limits) {
  return RunStageFromSource(ReadScript(script), ChunkNameOf(script), input, hooks, limits);
}

}  // namespace accelopt::lua
