// lua/convert.cc - JSON <-> Lua conversion and lazy JSON views.
#include "lua/convert.h"

#include "core/text.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "lua/internal.h"

namespace accelopt::lua {

using nlohmann::json;
using detail::Context;
using detail::ContextOf;

namespace detail {

bool IsValidUtf8(std::string_view s) { return FindInvalidUtf8(s) == std::string_view::npos; }

std::string FormatLuaNumber(lua_State* L, int index) {
  if (lua_isinteger(L, index)) return std::to_string(static_cast<long long>(lua_tointeger(L, index)));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.14g", static_cast<double>(lua_tonumber(L, index)));
  std::string s = buf;
  if (s.find_first_not_of("-0123456789") == std::string::npos) s += ".0";  // like Lua's tostring
  return s;
}

}  // namespace detail

// ---------------------------------------------------------------------------
// JSON -> Lua

namespace {

void PushJsonAt(lua_State* L, const json& value, int depth) {
  // stack: ... -> ... value
  luaL_checkstack(L, 4, "JSON value nested too deeply");
  switch (value.type()) {
    case json::value_t::null:
    case json::value_t::discarded:
      lua_rawgetp(L, LUA_REGISTRYINDEX, &detail::kNullKey);
      return;
    case json::value_t::boolean:
      lua_pushboolean(L, value.get<bool>());
      return;
    case json::value_t::number_integer:
      lua_pushinteger(L, static_cast<lua_Integer>(value.get<int64_t>()));
      return;
    case json::value_t::number_unsigned: {
      uint64_t u = value.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<lua_Integer>::max())) {
        lua_pushinteger(L, static_cast<lua_Integer>(u));
      } else {
        lua_pushnumber(L, static_cast<lua_Number>(u));
      }
      return;
    }
    case json::value_t::number_float:
      lua_pushnumber(L, value.get<double>());
      return;
    case json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      lua_pushlstring(L, s.data(), s.size());
      return;
    }
    case json::value_t::binary:
      luaL_error(L, "cannot convert a binary JSON value to Lua");
      return;
    case json::value_t::array: {
      if (depth + 1 > kMaxDepth) luaL_error(L, "JSON value nested deeper than %d levels", kMaxDepth);
      int n = static_cast<int>(std::min<size_t>(value.size(), std::numeric_limits<int>::max()));
      lua_createtable(L, n, 0);
      lua_Integer i = 1;
      for (const auto& item : value) {
        PushJsonAt(L, item, depth + 1);
        lua_rawseti(L, -2, i++);
      }
      lua_rawgetp(L, LUA_REGISTRYINDEX, &detail::kArrayMtKey);
      lua_setmetatable(L, -2);
      return;
    }
    case json::value_t::object: {
      if (depth + 1 > kMaxDepth) luaL_error(L, "JSON value nested deeper than %d levels", kMaxDepth);
      int n = static_cast<int>(std::min<size_t>(value.size(), std::numeric_limits<int>::max()));
      lua_createtable(L, 0, n);
      for (const auto& [key, item] : value.items()) {
        lua_pushlstring(L, key.data(), key.size());
        PushJsonAt(L, item, depth + 1);
        lua_rawset(L, -3);
      }
      lua_rawgetp(L, LUA_REGISTRYINDEX, &detail::kObjectMtKey);
      lua_setmetatable(L, -2);
      return;
    }
  }
  lua_pushnil(L);
}

}  // namespace

void PushJson(lua_State* L, const json& value) { PushJsonAt(L, value, 0); }

// ---------------------------------------------------------------------------
// Lazy views (expressions)

namespace {

struct View {
  const json* value;
};

/// The JSON behind the view at `index`, or null if it is not a view.
const json* ToView(lua_State* L, int index, Context& ctx) {
  if (lua_type(L, index) != LUA_TUSERDATA || !lua_getmetatable(L, index)) return nullptr;
  const void* mt = lua_topointer(L, -1);
  lua_pop(L, 1);
  if (mt != ctx.view_object_mt && mt != ctx.view_array_mt) return nullptr;
  return static_cast<View*>(lua_touserdata(L, index))->value;
}

const json& CheckView(lua_State* L, int index, Context& ctx) {
  const json* j = ToView(L, index, ctx);
  if (j == nullptr) luaL_typeerror(L, index, "JSON view");
  return *j;
}

// __index(view, key)
int ViewIndex(lua_State* L, Context& ctx) {
  const json& j = CheckView(L, 1, ctx);
  if (j.is_object()) {
    if (lua_type(L, 2) != LUA_TSTRING) return 0;
    size_t n = 0;
    const char* k = lua_tolstring(L, 2, &n);
    auto it = j.find(std::string(k, n));
    if (it == j.end()) return 0;
    PushJsonView(L, *it);
    return 1;
  }
  int isnum = 0;
  lua_Integer i = lua_tointegerx(L, 2, &isnum);
  if (!isnum || i < 1 || static_cast<size_t>(i) > j.size()) return 0;
  PushJsonView(L, j[static_cast<size_t>(i - 1)]);
  return 1;
}

int ViewLen(lua_State* L, Context& ctx) {
  lua_pushinteger(L, static_cast<lua_Integer>(CheckView(L, 1, ctx).size()));
  return 1;
}

// Iterator of __pairs: (view, key) -> next key, value
int ViewNext(lua_State* L, Context& ctx) {
  const json& j = CheckView(L, 1, ctx);
  if (j.is_object()) {
    json::const_iterator it;
    if (lua_isnoneornil(L, 2)) {
      it = j.begin();
    } else {
      size_t n = 0;
      const char* k = luaL_checklstring(L, 2, &n);
      it = j.find(std::string(k, n));
      if (it == j.end()) return luaL_error(L, "invalid key to 'next'");
      ++it;
    }
    if (it == j.end()) return 0;
    lua_pushlstring(L, it.key().data(), it.key().size());
    PushJsonView(L, it.value());
    return 2;
  }
  lua_Integer i = lua_isnoneornil(L, 2) ? 0 : luaL_checkinteger(L, 2);
  if (i < 0 || static_cast<size_t>(i) >= j.size()) return 0;
  lua_pushinteger(L, i + 1);
  PushJsonView(L, j[static_cast<size_t>(i)]);
  return 2;
}

int ViewPairs(lua_State* L, Context& ctx) {
  CheckView(L, 1, ctx);
  lua_pushcfunction(L, detail::Trampoline<ViewNext>);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

int ViewEq(lua_State* L, Context& ctx) {
  const json* a = ToView(L, 1, ctx);
  const json* b = ToView(L, 2, ctx);
  lua_pushboolean(L, a != nullptr && b != nullptr && *a == *b);
  return 1;
}

int ViewToString(lua_State* L, Context& ctx) {
  std::string s = CheckView(L, 1, ctx).dump(-1, ' ', false, json::error_handler_t::replace);
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

int ViewNewIndex(lua_State* L, Context&) {
  return luaL_error(L, "values from the expression context are read-only");
}

void MakeViewMetatable(lua_State* L, const char* name, void* key, const void** slot) {
  static const luaL_Reg kMethods[] = {
      {"__index", detail::Trampoline<ViewIndex>},   {"__len", detail::Trampoline<ViewLen>},
      {"__pairs", detail::Trampoline<ViewPairs>},   {"__eq", detail::Trampoline<ViewEq>},
      {"__tostring", detail::Trampoline<ViewToString>}, {"__newindex", detail::Trampoline<ViewNewIndex>},
      {nullptr, nullptr}};
  luaL_newlib(L, kMethods);
  lua_pushstring(L, name);
  lua_setfield(L, -2, "__name");  // used by Lua's error messages
  lua_pushstring(L, name);
  lua_setfield(L, -2, "__metatable");
  *slot = lua_topointer(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, key);
}

}  // namespace

namespace detail {

json ParseJsonBounded(Context& ctx, std::string_view text, const char* fn) {
  const size_t budget = ctx.limits.memory_bytes > 0 ? static_cast<size_t>(ctx.limits.memory_bytes) : static_cast<size_t>(-1);
  size_t charged = 0;
  bool over = false;
  auto charge = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::value || event == json::parse_event_t::key) {
      charged += 16 + (parsed.is_string() ? parsed.get_ref<const std::string&>().size() : 0);
      if (charged > budget) {
        over = true;
        throw std::length_error("over budget");
      }
    }
    return true;
  };
  json value;
  try {
    value = json::parse(text.begin(), text.end(), charge);
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string(fn) + ": " + e.what());
  } catch (const std::length_error&) {
    if (!over) throw;
  }
  if (over) {
    ctx.memory_limit_hit = true;  // classified as out_of_memory (sandbox.cc)
    throw std::runtime_error(std::string(fn) + ": the decoded value exceeds the memory limit of " + std::to_string(budget) +
                             " bytes: not enough memory");
  }
  return value;
}

void CreateViewMetatables(lua_State* L, Context& ctx) {
  MakeViewMetatable(L, "JSON object", &kViewObjectMtKey, &ctx.view_object_mt);
  MakeViewMetatable(L, "JSON array", &kViewArrayMtKey, &ctx.view_array_mt);
}
}  // namespace detail

void PushJsonView(lua_State* L, const json& value) {
  if (value.is_null()) {
    lua_pushnil(L);  // in expressions null is nil, so it is falsy
    return;
  }
  if (!value.is_structured()) {
    PushJsonAt(L, value, 0);
    return;
  }
  auto* view = static_cast<View*>(lua_newuserdatauv(L, sizeof(View), 0));
  view->value = &value;
  lua_rawgetp(L, LUA_REGISTRYINDEX, value.is_object() ? &detail::kViewObjectMtKey : &detail::kViewArrayMtKey);
  lua_setmetatable(L, -2);
}

// ---------------------------------------------------------------------------
// Lua -> JSON (no Lua-heap allocation: only raw reads of existing values)

namespace {

struct PathSegment {
  const PathSegment* parent;
  std::string_view key;  // valid if !is_index
  lua_Integer index;     // valid if is_index
  bool is_index;
};

bool IsIdentifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string RenderPath(std::string_view root, const PathSegment* seg) {
  std::vector<const PathSegment*> chain;
  for (; seg != nullptr; seg = seg->parent) chain.push_back(seg);
  std::string out(root);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const PathSegment& s = **it;
    if (s.is_index) {
      out += "[" + std::to_string(static_cast<long long>(s.index)) + "]";
    } else if (IsIdentifier(s.key)) {
      out += ".";
      out += s.key;
    } else {
      out += "[" + json(std::string(s.key)).dump(-1, ' ', false, json::error_handler_t::replace) + "]";
    }
  }
  return out;
}

/// Bytes a JSON string adds to serialised text beyond its own length (escapes).
size_t EscapeExtra(std::string_view s) {
  size_t extra = 2;  // the quotes
  for (unsigned char c : s) {
    if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') extra += 1;
    else if (c < 0x20) extra += 5;
  }
  return extra;
}

/// Size of a JSON value for the conversion budget: string bytes, nodes, and
/// the sum of the nodes' depths below the value (for indented text).
struct Footprint {
  size_t string_bytes = 0;
  size_t nodes = 0;
  size_t depth_sum = 0;
};

Footprint Measure(const json& value, size_t depth = 0) {
  Footprint out;
  out.nodes = 1;
  out.depth_sum = depth;
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    out.string_bytes = s.size() + EscapeExtra(s);
  } else if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      Footprint f = Measure(child, depth + 1);
      out.string_bytes += key.size() + EscapeExtra(key) + f.string_bytes;
      out.nodes += f.nodes;
      out.depth_sum += f.depth_sum;
    }
  } else if (value.is_array()) {
    for (const auto& child : value) {
      Footprint f = Measure(child, depth + 1);
      out.string_bytes += f.string_bytes;
      out.nodes += f.nodes;
      out.depth_sum += f.depth_sum;
    }
  }
  return out;
}

class ToJsonConverter {
 public:
  ToJsonConverter(lua_State* L, std::string_view root, int text_indent)
      : L_(L), ctx_(ContextOf(L)), root_(root), text_indent_(text_indent) {
    if (ctx_.limits.memory_bytes > 0) budget_ = static_cast<size_t>(ctx_.limits.memory_bytes);
  }

  json Convert(int index, const PathSegment* path, int depth) {
    switch (lua_type(L_, index)) {
      case LUA_TNONE:
      case LUA_TNIL:
        return nullptr;
      case LUA_TBOOLEAN:
        return static_cast<bool>(lua_toboolean(L_, index));
      case LUA_TNUMBER: {
        if (lua_isinteger(L_, index)) return static_cast<int64_t>(lua_tointeger(L_, index));
        double d = lua_tonumber(L_, index);
        if (!std::isfinite(d)) Fail(path, "cannot convert " + detail::FormatLuaNumber(L_, index) + " to JSON (not a finite number)");
        return d;
      }
      case LUA_TSTRING: {
        size_t n = 0;
        const char* s = lua_tolstring(L_, index, &n);  // a string already: no conversion
        if (!detail::IsValidUtf8(std::string_view(s, n))) Fail(path, "string is not valid UTF-8");
        ChargeString(path, std::string_view(s, n), depth);
        return std::string(s, n);
      }
      case LUA_TUSERDATA: {
        if (ctx_.null_value != nullptr && lua_touserdata(L_, index) == ctx_.null_value) return nullptr;
        if (const json* view = ToView(L_, index, ctx_)) {
          ChargeView(path, view, depth);
          return *view;
        }
        Fail(path, "cannot convert a userdata value to JSON");
      }
      case LUA_TTABLE:
        return ConvertTable(index, path, depth);
      case LUA_TFUNCTION:
        Fail(path, "cannot convert a function to JSON");
      case LUA_TTHREAD:
        Fail(path, "cannot convert a thread (coroutine) to JSON");
      default:
        break;
    }
    Fail(path, std::string("cannot convert a ") + lua_typename(L_, lua_type(L_, index)) + " value to JSON");
  }

 private:
  // ---- budget: the C++ copy (and its text) counts against the memory cap ----
  // A table may reference one string or context view many times; each
  // reference becomes its own copy in C++, so each is charged.

  static constexpr size_t kNodeBytes = 16;      // one json value
  static constexpr size_t kNodeTextBytes = 24;  // separators, numbers, literals in text

  size_t NodeCost(size_t nodes, size_t depth_sum) const {
    size_t cost = nodes * kNodeBytes;
    if (text_indent_ >= 0) cost += nodes * kNodeTextBytes + depth_sum * static_cast<size_t>(text_indent_);
    return cost;
  }

  void Charge(const PathSegment* path, size_t bytes) {
    charged_ += bytes;
    if (charged_ > budget_) {
      ctx_.memory_limit_hit = true;  // classifies the error as out_of_memory (sandbox.cc)
      throw LuaError("out_of_memory", RenderPath(root_, path) + ": the JSON copy exceeds the memory limit of " +
                                          std::to_string(budget_) + " bytes: not enough memory");
    }
  }

  void ChargeNode(const PathSegment* path, int depth) { Charge(path, NodeCost(1, static_cast<size_t>(depth))); }

  void ChargeString(const PathSegment* path, std::string_view s, int depth) {
    size_t bytes = s.size();
    if (text_indent_ >= 0) bytes += s.size() + EscapeExtra(s);
    Charge(path, bytes + NodeCost(1, static_cast<size_t>(depth)));
  }

  // The first copy of a context view is the host's own data; repeats are charged.
  void ChargeView(const PathSegment* path, const json* view, int depth) {
    auto [it, first] = views_.try_emplace(view);
    if (first) {
      it->second = Measure(*view);
      if (text_indent_ < 0) return;
    }
    const Footprint& f = it->second;
    size_t bytes = text_indent_ >= 0 ? f.string_bytes * 2 : f.string_bytes;
    Charge(path, bytes + NodeCost(f.nodes, f.depth_sum + f.nodes * static_cast<size_t>(depth)));
  }

  [[noreturn]] void Fail(const PathSegment* path, const std::string& what) {
    throw LuaError("bad_output", RenderPath(root_, path) + ": " + what);
  }

  std::string DescribeKey(int index) {
    int t = lua_type(L_, index);
    if (t == LUA_TNUMBER) return detail::FormatLuaNumber(L_, index);
    if (t == LUA_TBOOLEAN) return lua_toboolean(L_, index) ? "true" : "false";
    return std::string("<") + lua_typename(L_, t) + ">";
  }

  json ConvertTable(int index, const PathSegment* path, int depth) {
    ChargeNode(path, depth);
    if (depth + 1 > kMaxDepth) {
      Fail(path, "nested deeper than " + std::to_string(kMaxDepth) + " levels (cyclic table?)");
    }
    if (!lua_checkstack(L_, 4)) Fail(path, "Lua stack exhausted");
    enum class Shape { kAuto, kArray, kObject } shape = Shape::kAuto;
    if (lua_getmetatable(L_, index)) {
      const void* mt = lua_topointer(L_, -1);
      lua_pop(L_, 1);
      if (mt == ctx_.array_mt) shape = Shape::kArray;
      if (mt == ctx_.object_mt) shape = Shape::kObject;
    }

    // Pass 1: classify keys.
    size_t count = 0;
    bool all_positive_ints = true, all_strings = true;
    lua_Integer max_key = 0;
    std::string bad_key;       // first key that is neither a string nor a positive integer
    std::string nonstring_key; // first key that is not a string
    lua_pushnil(L_);
    while (lua_next(L_, index) != 0) {
      lua_pop(L_, 1);  // value; keep key
      ++count;
      int kt = lua_type(L_, -1);
      if (kt == LUA_TSTRING) {
        all_positive_ints = false;
      } else {
        all_strings = false;
        if (nonstring_key.empty()) nonstring_key = DescribeKey(-1);
        if (kt == LUA_TNUMBER && lua_isinteger(L_, -1) && lua_tointeger(L_, -1) >= 1) {
          max_key = std::max(max_key, lua_tointeger(L_, -1));
        } else {
          all_positive_ints = false;
          if (bad_key.empty()) bad_key = DescribeKey(-1);
        }
      }
    }
    bool is_sequence = all_positive_ints && static_cast<size_t>(max_key) == count;

    if (count == 0) return shape == Shape::kArray ? json::array() : json::object();
    if (shape == Shape::kAuto) shape = is_sequence ? Shape::kArray : Shape::kObject;

    if (shape == Shape::kArray) {
      if (!is_sequence) {
        if (all_positive_ints) {
          lua_Integer hole = 1;
          while (lua_rawgeti(L_, index, hole) != LUA_TNIL) {
            lua_pop(L_, 1);
            ++hole;
          }
          lua_pop(L_, 1);
          Fail(path, "array has a hole at index " + std::to_string(static_cast<long long>(hole)) +
                         " (use accel.null for null)");
        }
        Fail(path, "array has a key that is not an index 1..n (" +
                       (bad_key.empty() ? std::string("a string") : "[" + bad_key + "]") + ")");
      }
      json out = json::array();
      out.get_ref<json::array_t&>().reserve(count);
      for (lua_Integer i = 1; i <= max_key; ++i) {
        lua_rawgeti(L_, index, i);
        PathSegment seg{path, {}, i, true};
        out.push_back(Convert(lua_gettop(L_), &seg, depth + 1));
        lua_pop(L_, 1);
      }
      return out;
    }

    if (!all_strings) {
      if (all_positive_ints) {
        Fail(path, "table keys are integers but not a sequence 1..n (holes? use accel.null for null)");
      }
      Fail(path, "table key [" + nonstring_key +
                     "] is not a string (JSON objects need string keys; arrays need keys 1..n)");
    }
    json out = json::object();
    auto& obj = out.get_ref<json::object_t&>();
    lua_pushnil(L_);
    while (lua_next(L_, index) != 0) {
      size_t n = 0;
      const char* k = lua_tolstring(L_, -2, &n);  // keys are strings (checked): no conversion
      std::string_view key(k, n);
      PathSegment seg{path, key, 0, false};
      if (!detail::IsValidUtf8(key)) Fail(&seg, "key is not valid UTF-8");
      Charge(&seg, key.size() + 48 + (text_indent_ >= 0 ? key.size() + EscapeExtra(key) : 0));  // map node + key
      obj.emplace(std::string(key), Convert(lua_gettop(L_), &seg, depth + 1));
      lua_pop(L_, 1);
    }
    return out;
  }

  lua_State* L_;
  Context& ctx_;
  std::string_view root_;
  int text_indent_;  ///< -1: only the tree is built; >= 0: it is also serialised with this indent
  size_t budget_ = std::numeric_limits<size_t>::max();
  size_t charged_ = 0;
  std::unordered_map<const json*, Footprint> views_;
};

}  // namespace

json ToJson(lua_State* L, int index, std::string_view root, int text_indent) {
  int top = lua_gettop(L);
  index = lua_absindex(L, index);
  try {
    json out = ToJsonConverter(L, root, text_indent).Convert(index, nullptr, 0);
    lua_settop(L, top);
    return out;
  } catch (const LuaError&) {
    lua_settop(L, top);
    throw;
  }
}

// ---------------------------------------------------------------------------

namespace {
void AppendLuaDebug(std::string& out, const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      out += "accel.null";
      return;
    case json::value_t::array: {
      out += v.empty() ? "accel.array{" : "{";
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ", ";
        first = false;
        AppendLuaDebug(out, item);
      }
      out += "}";
      return;
    }
    case json::value_t::object: {
      out += "{";
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ", ";
        first = false;
        if (IsIdentifier(key)) {
          out += key;
        } else {
          out += "[" + json(key).dump(-1, ' ', false, json::error_handler_t::replace) + "]";
        }
        out += " = ";
        AppendLuaDebug(out, item);
      }
      out += "}";
      return;
    }
    default:
      out += v.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}
}  // namespace

std::string JsonToLuaDebug(const json& value) {
  std::string out;
  AppendLuaDebug(out, value);
  return out;
}

}  // namespace accelopt::lua
