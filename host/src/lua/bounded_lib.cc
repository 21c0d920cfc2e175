// lua/bounded_lib.cc - string.rep, table.move, table.insert and table.remove
// whose loops cannot outrun the sandbox's budgets.
//
// The instruction-count hook fires only between VM instructions, so a C
// function that loops is unstoppable: stock `string.rep('', math.maxinteger)`
// makes 2^63 empty copies, `table.move({}, 1, math.maxinteger, 1)` moves 2^63
// nils, and table.insert/remove walk a `__len` the script chose (issue 34:
// an expression that ignored both its budget and the stage timeout). Here
// string.rep counts every repetition as at least one byte of the state's
// memory limit, and the table functions poll the deadline as they go. Their
// results are otherwise those of Lua 5.4's ltablib.c / lstrlib.c.
#include <cstdint>
#include <string>

#include "lua/internal.h"

namespace accelopt::lua::detail {
namespace {

/// Iterations between two deadline polls of the table functions.
constexpr lua_Integer kPollEvery = 4096;

/// Repetitions string.rep allows when the state has no memory limit.
constexpr lua_Unsigned kUncappedRepetitions = lua_Unsigned{1} << 32;

void Poll(lua_State* L, lua_Integer done) {
  if (done % kPollEvery != 0) return;
  Context& ctx = ContextOf(L);
  if (DeadlineReached(L, ctx)) luaL_error(L, ctx.timed_out ? "timed out" : "cancelled");
}

// string.rep(s, n [, sep]); upvalue 1: the stock function, which does the
// work once the count is known to be bounded.
int Rep(lua_State* L) {
  luaL_checkstring(L, 1);
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_optstring(L, 3, "");
  Context& ctx = ContextOf(L);
  const bool capped = ctx.limit_bytes != static_cast<size_t>(-1);
  const lua_Unsigned limit = capped ? static_cast<lua_Unsigned>(ctx.limit_bytes) : kUncappedRepetitions;
  if (n > 0 && static_cast<lua_Unsigned>(n) > limit) {
    // Classified as out_of_memory like any allocation over the cap (sandbox.cc), with the reason.
    ctx.memory_limit_hit = true;
    ctx.memory_detail = "string.rep: " + std::to_string(n) + " repetitions exceed the memory limit (each " +
                        "repetition counts as at least one byte)";
    return luaL_error(L, "string.rep: not enough memory");
  }
  int args = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, args, 1);
  return 1;
}

// ltablib.c's checktab: a table, or an object whose metatable has the metamethods needed.
constexpr int kRead = 1, kWrite = 2, kLength = 4;

bool HasField(lua_State* L, const char* key, int n) {
  lua_pushstring(L, key);
  return lua_rawget(L, -n) != LUA_TNIL;
}

void CheckTable(lua_State* L, int arg, int what) {
  if (lua_type(L, arg) == LUA_TTABLE) return;
  int n = 1;
  if (lua_getmetatable(L, arg) && (!(what & kRead) || HasField(L, "__index", ++n)) &&
      (!(what & kWrite) || HasField(L, "__newindex", ++n)) && (!(what & kLength) || HasField(L, "__len", ++n))) {
    lua_pop(L, n);
  } else {
    luaL_checktype(L, arg, LUA_TTABLE);  // raises the stock message
  }
}

lua_Integer Length(lua_State* L, int arg, int what) {
  CheckTable(L, arg, what | kLength);
  return luaL_len(L, arg);
}

int Insert(lua_State* L) {
  lua_Integer e = Length(L, 1, kRead | kWrite);
  e = static_cast<lua_Integer>(static_cast<lua_Unsigned>(e) + 1u);  // first empty element
  lua_Integer pos;
  switch (lua_gettop(L)) {
    case 2:
      pos = e;
      break;
    case 3: {
      pos = luaL_checkinteger(L, 2);
      luaL_argcheck(L, static_cast<lua_Unsigned>(pos) - 1u < static_cast<lua_Unsigned>(e), 2, "position out of bounds");
      lua_Integer done = 0;
      for (lua_Integer i = e; i > pos; i--) {  // move up elements
        Poll(L, ++done);
        lua_geti(L, 1, i - 1);
        lua_seti(L, 1, i);
      }
      break;
    }
    default:
      return luaL_error(L, "wrong number of arguments to 'insert'");
  }
  lua_seti(L, 1, pos);
  return 0;
}

int Remove(lua_State* L) {
  lua_Integer size = Length(L, 1, kRead | kWrite);
  lua_Integer pos = luaL_optinteger(L, 2, size);
  if (pos != size) {
    luaL_argcheck(L, static_cast<lua_Unsigned>(pos) - 1u <= static_cast<lua_Unsigned>(size), 2,
                  "position out of bounds");
  }
  lua_geti(L, 1, pos);
  lua_Integer done = 0;
  for (; pos < size; pos++) {
    Poll(L, ++done);
    lua_geti(L, 1, pos + 1);
    lua_seti(L, 1, pos);
  }
  lua_pushnil(L);
  lua_seti(L, 1, pos);
  return 1;
}

int Move(lua_State* L) {
  lua_Integer f = luaL_checkinteger(L, 2);
  lua_Integer e = luaL_checkinteger(L, 3);
  lua_Integer t = luaL_checkinteger(L, 4);
  int tt = !lua_isnoneornil(L, 5) ? 5 : 1;  // destination table
  CheckTable(L, 1, kRead);
  CheckTable(L, tt, kWrite);
  if (e >= f) {
    luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3, "too many elements to move");
    lua_Integer n = e - f + 1;
    luaL_argcheck(L, t <= LUA_MAXINTEGER - n + 1, 4, "destination wrap around");
    if (t > e || t <= f || (tt != 1 && !lua_compare(L, 1, tt, LUA_OPEQ))) {
      for (lua_Integer i = 0; i < n; i++) {
        Poll(L, i + 1);
        lua_geti(L, 1, f + i);
        lua_seti(L, tt, t + i);
      }
    } else {
      for (lua_Integer i = n - 1; i >= 0; i--) {
        Poll(L, n - i);
        lua_geti(L, 1, f + i);
        lua_seti(L, tt, t + i);
      }
    }
  }
  lua_pushvalue(L, tt);
  return 1;
}

}  // namespace

void InstallBoundedLibs(lua_State* L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, LUA_STRLIBNAME);
  lua_getfield(L, -1, "rep");
  lua_pushcclosure(L, Rep, 1);
  lua_setfield(L, -2, "rep");
  lua_pop(L, 1);
  lua_getfield(L, -1, LUA_TABLIBNAME);
  static const luaL_Reg kTable[] = {{"insert", Insert}, {"remove", Remove}, {"move", Move}, {nullptr, nullptr}};
  luaL_setfuncs(L, kTable, 0);
  lua_pop(L, 2);
}

}  // namespace accelopt::lua::detail
