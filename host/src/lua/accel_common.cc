// lua/accel_common.cc - the part of the `accel` table that stage scripts and
// `${{ }}` expressions share: JSON text, the null/array/object markers and the
// collection helpers len/contains/join/keys (docs/lua-stages.md, "The accel
// table"). Stages add logging, files, failure and Python (host_table.cc);
// expressions add the status tests (expression.cc).
#include <algorithm>
#include <string>
#include <vector>

#include "lua/convert.h"
#include "lua/internal.h"

namespace accelopt::lua::detail {

using nlohmann::json;

namespace {

/// The JSON behind a lazy context view at `index` (expressions only), or null.
const json* ViewAt(lua_State* L, int index, Context& ctx) {
  if (lua_type(L, index) != LUA_TUSERDATA || !lua_getmetatable(L, index)) return nullptr;
  const void* mt = lua_topointer(L, -1);
  lua_pop(L, 1);
  if (mt == nullptr || (mt != ctx.view_object_mt && mt != ctx.view_array_mt)) return nullptr;
  return *static_cast<const json* const*>(lua_touserdata(L, index));
}

bool IsMarkedObject(lua_State* L, int index, Context& ctx) {
  if (!lua_getmetatable(L, index)) return false;
  bool is_object = lua_topointer(L, -1) == ctx.object_mt;
  lua_pop(L, 1);
  return is_object;
}

// accel.len(x): bytes of a string, elements of an array, members of an object
int Len(lua_State* L, Context& ctx) {
  switch (lua_type(L, 1)) {
    case LUA_TSTRING:
      lua_pushinteger(L, static_cast<lua_Integer>(lua_rawlen(L, 1)));
      return 1;
    case LUA_TTABLE: {
      lua_Integer n = 0;
      lua_pushnil(L);
      while (lua_next(L, 1) != 0) {
        lua_pop(L, 1);
        ++n;
      }
      lua_pushinteger(L, n);
      return 1;
    }
    default:
      if (const json* j = ViewAt(L, 1, ctx)) {
        lua_pushinteger(L, static_cast<lua_Integer>(j->size()));
        return 1;
      }
      return luaL_typeerror(L, 1, "string, array or object");
  }
}

// accel.contains(haystack, needle): substring, array element, or object key
int Contains(lua_State* L, Context& ctx) {
  luaL_checkany(L, 2);
  if (lua_type(L, 1) == LUA_TSTRING) {
    size_t hn = 0, nn = 0;
    const char* hay = lua_tolstring(L, 1, &hn);
    const char* needle = luaL_checklstring(L, 2, &nn);
    // Checks the deadline while it searches (a naive search is O(n*m)).
    lua_pushboolean(L, BoundedFind(L, std::string_view(hay, hn), std::string_view(needle, nn)) != std::string_view::npos);
    return 1;
  }
  if (const json* j = ViewAt(L, 1, ctx)) {
    if (j->is_object()) {
      lua_pushboolean(L, lua_type(L, 2) == LUA_TSTRING && j->contains(lua_tostring(L, 2)));
      return 1;
    }
    json needle = ToJson(L, 2, "needle");
    lua_pushboolean(L, std::find(j->begin(), j->end(), needle) != j->end());
    return 1;
  }
  if (lua_type(L, 1) == LUA_TTABLE) {
    if (IsMarkedObject(L, 1, ctx)) {
      lua_pushvalue(L, 2);
      lua_pushboolean(L, lua_rawget(L, 1) != LUA_TNIL);
      return 1;
    }
    lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, 1));
    for (lua_Integer i = 1; i <= n; ++i) {
      lua_rawgeti(L, 1, i);
      bool equal = lua_compare(L, -1, 2, LUA_OPEQ) != 0;
      lua_pop(L, 1);
      if (equal) {
        lua_pushboolean(L, 1);
        return 1;
      }
    }
    lua_pushboolean(L, 0);
    return 1;
  }
  return luaL_typeerror(L, 1, "string, array or object");
}

// accel.join(list [, sep=","]): tostring of each element, joined
int Join(lua_State* L, Context& ctx) {
  const char* sep = luaL_optstring(L, 2, ",");
  const json* j = ViewAt(L, 1, ctx);
  if (j != nullptr ? !j->is_array() : lua_type(L, 1) != LUA_TTABLE) return luaL_typeerror(L, 1, "array");
  lua_settop(L, 1);
  lua_Integer n = luaL_len(L, 1);
  std::string out;
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, 1, i);
    size_t len = 0;
    const char* s = luaL_tolstring(L, -1, &len);
    if (i > 1) out += sep;
    out.append(s, len);
    lua_pop(L, 2);
  }
  lua_pushlstring(L, out.data(), out.size());
  return 1;
}

// accel.keys(object): sorted array of its string keys
int Keys(lua_State* L, Context& ctx) {
  std::vector<std::string> keys;
  if (const json* j = ViewAt(L, 1, ctx)) {
    if (!j->is_object()) return luaL_typeerror(L, 1, "object");
    for (const auto& [key, value] : j->items()) keys.push_back(key);
  } else {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) {
      lua_pop(L, 1);
      if (lua_type(L, -1) == LUA_TSTRING) {
        size_t n = 0;
        const char* k = lua_tolstring(L, -1, &n);
        keys.emplace_back(k, n);
      }
    }
    std::sort(keys.begin(), keys.end());
  }
  lua_createtable(L, static_cast<int>(keys.size()), 0);
  lua_Integer i = 1;
  for (const auto& key : keys) {
    lua_pushlstring(L, key.data(), key.size());
    lua_rawseti(L, -2, i++);
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kArrayMtKey);
  lua_setmetatable(L, -2);
  return 1;
}

// accel.is_null(v): true for nil and accel.null (JSON null in both of its Lua forms)
int IsNull(lua_State* L, Context& ctx) {
  lua_pushboolean(L, lua_isnoneornil(L, 1) || lua_topointer(L, 1) == ctx.null_value);
  return 1;
}

// accel.json.encode(value [, indent]) -> string
int JsonEncode(lua_State* L, Context&) {
  lua_Integer indent = luaL_optinteger(L, 2, -1);
  luaL_argcheck(L, indent >= -1 && indent <= 16, 2, "indent must be -1..16");
  json value = ToJson(L, 1, "value", std::max<int>(0, static_cast<int>(indent)));  // tree and text count against the cap
  std::string text = value.dump(static_cast<int>(indent));
  lua_pushlstring(L, text.data(), text.size());
  return 1;
}

// accel.json.decode(text) -> value (the parsed tree counts against the cap).
int JsonDecode(lua_State* L, Context& ctx) {
  size_t n = 0;
  const char* text = luaL_checklstring(L, 1, &n);
  json value = ParseJsonBounded(ctx, std::string_view(text, n), "accel.json.decode");
  PushJson(L, value);
  return 1;
}

int Mark(lua_State* L, void* key) {
  if (lua_isnoneornil(L, 1)) {
    lua_settop(L, 0);
    lua_newtable(L);
  } else {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, key);
  lua_setmetatable(L, 1);
  return 1;
}

// accel.array([t]) -> t marked as a JSON array
int MarkArray(lua_State* L, Context&) { return Mark(L, &kArrayMtKey); }
// accel.object([t]) -> t marked as a JSON object
int MarkObject(lua_State* L, Context&) { return Mark(L, &kObjectMtKey); }

}  // namespace

void SetAccelCommon(lua_State* L) {
  static const luaL_Reg kFunctions[] = {{"array", Trampoline<MarkArray>}, {"object", Trampoline<MarkObject>},
                                        {"is_null", Trampoline<IsNull>},  {"len", Trampoline<Len>},
                                        {"contains", Trampoline<Contains>}, {"join", Trampoline<Join>},
                                        {"keys", Trampoline<Keys>},       {nullptr, nullptr}};
  static const luaL_Reg kJson[] = {
      {"encode", Trampoline<JsonEncode>}, {"decode", Trampoline<JsonDecode>}, {nullptr, nullptr}};
  luaL_setfuncs(L, kFunctions, 0);
  luaL_newlib(L, kJson);
  lua_setfield(L, -2, "json");
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kNullKey);
  lua_setfield(L, -2, "null");
}

}  // namespace accelopt::lua::detail
