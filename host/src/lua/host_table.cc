// lua/host_table.cc - the `accel` table offered to Lua stage scripts: the
// shared part (accel_common.cc: JSON, markers, collection helpers) plus
// logging, structured failure, Python calls and a file system restricted to
// the run directory (reads) and stage directory (writes).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "core/run_dir.h"
#include "lua/convert.h"
#include "lua/internal.h"
#include "python/interpreter.h"

namespace accelopt::lua::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// ---- logging ------------------------------------------------------------------

/// Longest log message built in C++ (1 MiB): `print(table.unpack(t))` with
/// one large string referenced many times must not build an unbounded copy.
constexpr size_t kMaxLogBytes = 1u << 20;

/// tostring() of the arguments from `first` on, joined by `sep`, truncated
/// at kMaxLogBytes.
std::string JoinArgs(lua_State* L, int first, const char* sep) {
  std::string out;
  size_t dropped = 0;
  int top = lua_gettop(L);
  for (int i = first; i <= top; ++i) {
    size_t n = 0;
    const char* s = luaL_tolstring(L, i, &n);
    std::string_view piece(s, n);
    size_t room = out.size() < kMaxLogBytes ? kMaxLogBytes - out.size() : 0;
    if (room == 0) {
      dropped += std::strlen(sep) + piece.size();
    } else {
      if (i > first) out += sep;
      room = out.size() < kMaxLogBytes ? kMaxLogBytes - out.size() : 0;
      out.append(piece.substr(0, room));
      dropped += piece.size() - std::min(room, piece.size());
    }
    lua_pop(L, 1);
  }
  if (dropped > 0) out += " ... (" + std::to_string(dropped) + " more bytes not logged)";
  return out;
}

void Emit(Context& ctx, int level, const std::string& message) {
  if (ctx.hooks != nullptr && ctx.hooks->log) ctx.hooks->log(level, message);
}

int ParseLevel(lua_State* L, int index) {
  if (lua_type(L, index) == LUA_TNUMBER) {
    lua_Integer level = luaL_checkinteger(L, index);
    luaL_argcheck(L, level >= 0 && level <= 4, index, "log level must be 0..4");
    return static_cast<int>(level);
  }
  static const char* const kNames[] = {"trace", "debug", "info", "warn", "error", nullptr};
  return luaL_checkoption(L, index, nullptr, kNames);
}

// accel.log(level, ...): level is 0..4 or "trace"|"debug"|"info"|"warn"|"error"
int Log(lua_State* L, Context& ctx) {
  int level = ParseLevel(L, 1);
  Emit(ctx, level, JoinArgs(L, 2, " "));
  return 0;
}

template <int kLevel>
int LogAt(lua_State* L, Context& ctx) {
  Emit(ctx, kLevel, JoinArgs(L, 1, " "));
  return 0;
}

int Print(lua_State* L, Context& ctx) {
  Emit(ctx, 2, JoinArgs(L, 1, "\t"));
  return 0;
}

// ---- failure -----------------------------------------------------------------

// accel.fail(kind, message [, details]) raises {kind, message, details}
int Fail(lua_State* L, Context&) {
  size_t kind_len = 0;
  const char* kind = luaL_checklstring(L, 1, &kind_len);
  luaL_argcheck(L, kind_len > 0, 1, "kind must not be empty");
  lua_settop(L, 3);  // kind, message, details (maybe nil)
  const char* message = lua_isnoneornil(L, 2) ? "" : luaL_tolstring(L, 2, nullptr);
  if (!lua_isnoneornil(L, 3)) ToJson(L, 3, "details");  // reject unconvertible details now, with a path
  lua_createtable(L, 0, 3);
  lua_pushstring(L, kind);
  lua_setfield(L, -2, "kind");
  lua_pushstring(L, message);
  lua_setfield(L, -2, "message");
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, "details");
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kFailMtKey);
  lua_setmetatable(L, -2);
  return lua_error(L);
}

// ---- Python -------------------------------------------------------------------

// What a Python call gave: the value, or a failure {kind, message, details}.
struct PythonOutcome {
  json value;
  std::string kind;  // "" on success
  std::string message;
  json details;
};

// Calls through accelopt.lua_calls, which refuses (LuaCallRefused) anything but
// the host's functions listed in LUA_CALLABLE and functions of the user's
// python_path modules: os.system or os.getenv("OPENAI_API_KEY") would undo the
// sandbox (issue 34).
PythonOutcome CallPython(const std::string& module, const std::string& function, const json& args, const json& kwargs) {
  PythonOutcome outcome;
  json folders = json::array();
  for (const auto& folder : python::UserPythonPaths()) folders.push_back(folder);
  try {
    outcome.value = python::CallJsonArgs(accelopt::api::kLuaCall,
                                         json::array({module, function, args, kwargs, folders}));
  } catch (const python::PythonError& e) {
    if (e.type() == "LuaCallRefused") {
      std::string message = e.what();
      const std::string prefix = e.type() + ": ";
      if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
      outcome.kind = "forbidden_call";
      outcome.message = "accel.python_call: " + message;
      return outcome;
    }
    outcome.kind = "python_error";
    outcome.message = module + "." + function + ": " + e.what();
    outcome.details = {{"type", e.type()}, {"traceback", e.traceback()}};
  } catch (const std::exception& e) {
    outcome.kind = "python_error";
    outcome.message = module + "." + function + ": " + e.what();
  }
  return outcome;
}

// accel.python_call(module, function [, args [, kwargs]]) -> value
// Calls module.function(*args, **kwargs) in the host's embedded Python
// (args: a list, kwargs: a table by name; both JSON). A Python exception
// fails like accel.fail("python_error", message, {type, traceback}); a
// function a Lua stage may not call like accel.fail("forbidden_call", message).
int PythonCall(lua_State* L, Context&) {
  const char* module_name = luaL_checkstring(L, 1);  // argument errors unwind before any C++ object exists
  const char* function_name = luaL_checkstring(L, 2);
  bool failed = false;
  {
    std::string module = module_name;
    std::string function = function_name;
    json args = lua_isnoneornil(L, 3) ? json::array() : ToJson(L, 3, "args");
    json kwargs = lua_isnoneornil(L, 4) ? json::object() : ToJson(L, 4, "kwargs");
    if (args.is_object() && args.empty()) args = json::array();  // an unmarked {} means no arguments
    if (!args.is_array()) throw std::runtime_error("accel.python_call: args must be a list of positional arguments");
    if (!kwargs.is_object()) throw std::runtime_error("accel.python_call: kwargs must be a table of keyword arguments");
    PythonOutcome outcome = CallPython(module, function, args, kwargs);
    if (outcome.kind.empty()) {
      PushJson(L, outcome.value);
    } else {
      failed = true;
      lua_createtable(L, 0, 3);
      lua_pushlstring(L, outcome.kind.data(), outcome.kind.size());
      lua_setfield(L, -2, "kind");
      lua_pushlstring(L, outcome.message.data(), outcome.message.size());
      lua_setfield(L, -2, "message");
      PushJson(L, outcome.details);
      lua_setfield(L, -2, "details");
      lua_rawgetp(L, LUA_REGISTRYINDEX, &kFailMtKey);
      lua_setmetatable(L, -2);
    }
  }  // every C++ object is gone before lua_error unwinds
  if (failed) return lua_error(L);
  return 1;
}

// ---- file system ------------------------------------------------------------

bool IsBelow(const fs::path& path, const fs::path& root) {
  fs::path rel = path.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

/// Resolves `rel` below `root`: relative paths only, no `..` escape after
/// normalisation, and no symlink leading outside (checked on the canonical
/// path). Throws std::runtime_error naming `fn` and `rel`.
fs::path Resolve(const fs::path& root, std::string_view rel, const char* fn, const char* root_name) {
  auto fail = [&](const std::string& why) -> std::runtime_error {
    return std::runtime_error(std::string(fn) + ": '" + std::string(rel) + "': " + why);
  };
  if (root.empty()) throw std::runtime_error(std::string(fn) + ": not available (no " + root_name + ")");
  if (rel.find('\0') != std::string_view::npos) throw fail("path contains a NUL byte");
  fs::path p{std::string(rel)};
  if (p.is_absolute() || p.has_root_name() || p.has_root_directory()) {
    throw fail(std::string("absolute paths are not allowed (paths are relative to the ") + root_name + ")");
  }
  fs::path normal = p.lexically_normal();
  if (!normal.empty() && *normal.begin() == "..") throw fail(std::string("path escapes the ") + root_name);
  std::error_code ec;
  fs::path root_canonical = fs::weakly_canonical(root, ec);
  if (ec) throw fail(std::string("cannot resolve the ") + root_name + ": " + ec.message());
  fs::path full = fs::weakly_canonical(root_canonical / normal, ec);
  if (ec) throw fail("cannot resolve path: " + ec.message());
  if (!IsBelow(full, root_canonical)) throw fail(std::string("path escapes the ") + root_name + " (symlink?)");
  // A dangling symlink is left unresolved by weakly_canonical; refuse any
  // symlink component that does not resolve to a place below the root.
  fs::path walk = root_canonical;
  for (const auto& part : full.lexically_relative(root_canonical)) {
    if (part == ".") continue;
    walk /= part;
    if (fs::is_symlink(fs::symlink_status(walk, ec))) {
      fs::path target = fs::canonical(walk, ec);
      if (ec || !IsBelow(target, root_canonical)) {
        throw fail(std::string("symlink leads outside the ") + root_name);
      }
    }
  }
  return full;
}

std::string RelArg(lua_State* L, int index) {
  size_t n = 0;
  const char* s = luaL_optlstring(L, index, ".", &n);
  return std::string(s, n);
}

// accel.fs.read(rel) -> string (whole file, bytes)
int FsRead(lua_State* L, Context& ctx) {
  std::string rel(luaL_checkstring(L, 1));
  fs::path path = Resolve(ctx.hooks ? ctx.hooks->read_root : fs::path(), rel, "accel.fs.read", "run directory");
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw std::runtime_error("accel.fs.read: '" + rel + "': " + (fs::exists(path, ec) ? "not a regular file" : "no such file"));
  }
  uintmax_t size = fs::file_size(path, ec);
  if (ec) throw std::runtime_error("accel.fs.read: '" + rel + "': " + ec.message());
  if (ctx.limits.memory_bytes > 0 && size > static_cast<uintmax_t>(ctx.limits.memory_bytes)) {
    throw std::runtime_error("accel.fs.read: '" + rel + "': file of " + std::to_string(size) +
                             " bytes exceeds the memory limit");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("accel.fs.read: '" + rel + "': " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string data = std::move(buffer).str();
  lua_pushlstring(L, data.data(), data.size());
  return 1;
}

// accel.fs.exists(rel) -> boolean
int FsExists(lua_State* L, Context& ctx) {
  std::string rel(luaL_checkstring(L, 1));
  fs::path path = Resolve(ctx.hooks ? ctx.hooks->read_root : fs::path(), rel, "accel.fs.exists", "run directory");
  std::error_code ec;
  lua_pushboolean(L, fs::exists(path, ec));
  return 1;
}

// accel.fs.list([rel]) -> sorted array of names; directories end with "/"
int FsList(lua_State* L, Context& ctx) {
  std::string rel = RelArg(L, 1);
  fs::path path = Resolve(ctx.hooks ? ctx.hooks->read_root : fs::path(), rel, "accel.fs.list", "run directory");
  std::error_code ec;
  if (!fs::is_directory(path, ec)) throw std::runtime_error("accel.fs.list: '" + rel + "': not a directory");
  std::vector<std::string> names;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (it->is_directory(ec)) name += "/";
    names.push_back(std::move(name));
  }
  if (ec) throw std::runtime_error("accel.fs.list: '" + rel + "': " + ec.message());
  std::sort(names.begin(), names.end());
  lua_createtable(L, static_cast<int>(names.size()), 0);
  lua_Integer i = 1;
  for (const auto& name : names) {
    lua_pushlstring(L, name.data(), name.size());
    lua_rawseti(L, -2, i++);
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kArrayMtKey);
  lua_setmetatable(L, -2);
  return 1;
}

// accel.fs.write(rel, text): creates parent directories; replaces the file
int FsWrite(lua_State* L, Context& ctx) {
  std::string rel(luaL_checkstring(L, 1));
  size_t n = 0;
  const char* data = luaL_checklstring(L, 2, &n);
  fs::path root = ctx.hooks ? ctx.hooks->write_root : fs::path();
  fs::path path = Resolve(root, rel, "accel.fs.write", "stage directory");
  std::error_code ec;
  if (path == fs::weakly_canonical(root, ec)) throw std::runtime_error("accel.fs.write: '" + rel + "': is a directory");
  // The write itself follows no symlink below the stage directory (folders
  // made with mkdirat/O_NOFOLLOW, a fresh O_EXCL temporary renamed over the
  // file), so a link swapped in after the check above cannot redirect it.
  try {
    WriteFileNoFollow(root, fs::path(rel).lexically_normal(), std::string_view(data, n));
  } catch (const std::exception& e) {
    throw std::runtime_error("accel.fs.write: '" + rel + "': " + e.what());
  }
  return 0;
}

}  // namespace

int LuaPrint(lua_State* L) { return Trampoline<Print>(L); }

void PushAccelTable(lua_State* L) {
  static const luaL_Reg kFunctions[] = {{"log", Trampoline<Log>},
                                        {"trace", Trampoline<LogAt<0>>},
                                        {"debug", Trampoline<LogAt<1>>},
                                        {"info", Trampoline<LogAt<2>>},
                                        {"warn", Trampoline<LogAt<3>>},
                                        {"error", Trampoline<LogAt<4>>},
                                        {"fail", Trampoline<Fail>},
                                        {"python_call", Trampoline<PythonCall>},
                                        {nullptr, nullptr}};
  static const luaL_Reg kFs[] = {{"read", Trampoline<FsRead>},
                                 {"write", Trampoline<FsWrite>},
                                 {"exists", Trampoline<FsExists>},
                                 {"list", Trampoline<FsList>},
                                 {nullptr, nullptr}};
  luaL_newlib(L, kFunctions);
  SetAccelCommon(L);
  luaL_newlib(L, kFs);
  lua_setfield(L, -2, "fs");
}

}  // namespace accelopt::lua::detail
