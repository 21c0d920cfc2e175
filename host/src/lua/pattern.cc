// lua/pattern.cc - the Lua 5.4 pattern functions (string.find, match,
// gmatch, gsub) with a step budget.
//
// The stock matcher backtracks inside one C call, which the instruction-count
// deadline hook cannot interrupt: "(.-)(.-)(.-)(.-)x" on a few kilobytes runs
// for hours. This implementation follows the language of the Lua 5.4 manual
// (§6.4.1: classes, sets, the * + - ? quantifiers, %b, %f, back-references,
// position captures, ^ and $ anchors) and the functions' documented results,
// and counts every matcher step and scanned byte; every kCheckEvery steps it
// checks the sandbox deadline and cancel flag and raises the usual
// timeout/cancelled error.
#include <cctype>
#include <cstring>

#include "lua/internal.h"

namespace accelopt::lua::detail {
namespace {

constexpr int kMaxCaptures = 32;                  // LUA_MAXCAPTURES
constexpr int kMaxMatchDepth = 200;               // recursion limit of the matcher (as MAXCCALLS)
constexpr long kCaptureUnfinished = -1;
constexpr long kCapturePosition = -2;
constexpr uint64_t kCheckEvery = 1u << 16;        // steps between two deadline checks
constexpr const char* kSpecials = "^$*+?.([%-";

struct MatchState {
  const char* src_init;
  const char* src_end;
  const char* p_end;
  lua_State* L;
  Context* ctx;
  int depth_left;
  int level;
  uint64_t steps;
  uint64_t next_check;
  struct {
    const char* init;
    long len;
  } capture[kMaxCaptures];
};

void CheckBudget(MatchState& ms) {
  ms.next_check = ms.steps + kCheckEvery;
  if (DeadlineReached(ms.L, *ms.ctx)) luaL_error(ms.L, ms.ctx->timed_out ? "timed out" : "cancelled");
}

inline void Tick(MatchState& ms, uint64_t steps = 1) {
  ms.steps += steps;
  if (ms.steps >= ms.next_check) CheckBudget(ms);
}

inline unsigned char U(char c) { return static_cast<unsigned char>(c); }

// Position of the byte after the single-character class that starts at p.
const char* ClassEnd(MatchState& ms, const char* p) {
  char c = *p++;
  if (c == '%') {
    if (p >= ms.p_end) luaL_error(ms.L, "malformed pattern (ends with '%%')");
    return p + 1;
  }
  if (c == '[') {
    if (*p == '^') p++;
    do {  // the first character after '[' (or '[^') is a member, even ']'
      if (p >= ms.p_end) luaL_error(ms.L, "malformed pattern (missing ']')");
      if (*(p++) == '%' && p < ms.p_end) p++;  // an escaped member such as %]
    } while (*p != ']');
    return p + 1;
  }
  return p;
}

bool MatchClass(int c, int cl) {
  bool res;
  switch (std::tolower(cl)) {
    case 'a': res = std::isalpha(c); break;
    case 'c': res = std::iscntrl(c); break;
    case 'd': res = std::isdigit(c); break;
    case 'g': res = std::isgraph(c); break;
    case 'l': res = std::islower(c); break;
    case 'p': res = std::ispunct(c); break;
    case 's': res = std::isspace(c); break;
    case 'u': res = std::isupper(c); break;
    case 'w': res = std::isalnum(c); break;
    case 'x': res = std::isxdigit(c); break;
    default: return cl == c;  // %. %% %] ...: the character itself
  }
  return std::isupper(cl) ? !res : res;  // %A is the complement of %a
}

// p points at '[', ec at its closing ']'.
bool MatchBracketClass(int c, const char* p, const char* ec) {
  bool member = true;
  if (*(p + 1) == '^') {
    member = false;
    p++;
  }
  while (++p < ec) {
    if (*p == '%') {
      p++;
      if (MatchClass(c, U(*p))) return member;
    } else if (*(p + 1) == '-' && p + 2 < ec) {
      p += 2;
      if (U(*(p - 2)) <= c && c <= U(*p)) return member;
    } else if (U(*p) == c) {
      return member;
    }
  }
  return !member;
}

bool SingleMatch(const MatchState& ms, const char* s, const char* p, const char* ep) {
  if (s >= ms.src_end) return false;
  int c = U(*s);
  switch (*p) {
    case '.': return true;
    case '%': return MatchClass(c, U(*(p + 1)));
    case '[': return MatchBracketClass(c, p, ep - 1);
    default: return U(*p) == c;
  }
}

const char* DoMatch(MatchState& ms, const char* s, const char* p);

const char* MatchBalance(MatchState& ms, const char* s, const char* p) {
  if (p >= ms.p_end - 1) luaL_error(ms.L, "malformed pattern (missing arguments to '%%b')");
  if (s >= ms.src_end || *s != *p) return nullptr;
  const char open = *p, close = *(p + 1);
  int depth = 1;
  while (++s < ms.src_end) {
    Tick(ms);
    if (*s == close) {
      if (--depth == 0) return s + 1;
    } else if (*s == open) {
      depth++;
    }
  }
  return nullptr;
}

const char* MaxExpand(MatchState& ms, const char* s, const char* p, const char* ep) {
  ptrdiff_t i = 0;
  while (SingleMatch(ms, s + i, p, ep)) {
    i++;
    Tick(ms);
  }
  while (i >= 0) {  // try the rest with the longest expansion first
    if (const char* res = DoMatch(ms, s + i, ep + 1)) return res;
    i--;
  }
  return nullptr;
}

const char* MinExpand(MatchState& ms, const char* s, const char* p, const char* ep) {
  for (;;) {
    if (const char* res = DoMatch(ms, s, ep + 1)) return res;
    if (!SingleMatch(ms, s, p, ep)) return nullptr;
    s++;
  }
}

const char* StartCapture(MatchState& ms, const char* s, const char* p, long what) {
  if (ms.level >= kMaxCaptures) luaL_error(ms.L, "too many captures");
  ms.capture[ms.level].init = s;
  ms.capture[ms.level].len = what;
  ms.level++;
  const char* res = DoMatch(ms, s, p);
  if (res == nullptr) ms.level--;
  return res;
}

const char* EndCapture(MatchState& ms, const char* s, const char* p) {
  int l = -1;
  for (int i = ms.level - 1; i >= 0; i--) {
    if (ms.capture[i].len == kCaptureUnfinished) {
      l = i;
      break;
    }
  }
  if (l < 0) luaL_error(ms.L, "invalid pattern capture");
  ms.capture[l].len = static_cast<long>(s - ms.capture[l].init);
  const char* res = DoMatch(ms, s, p);
  if (res == nullptr) ms.capture[l].len = kCaptureUnfinished;
  return res;
}

const char* MatchCapture(MatchState& ms, const char* s, int digit) {
  int l = digit - '1';
  if (l < 0 || l >= ms.level || ms.capture[l].len == kCaptureUnfinished) {
    luaL_error(ms.L, "invalid capture index %%%d", l + 1);
  }
  size_t len = static_cast<size_t>(ms.capture[l].len);
  Tick(ms, len);
  if (static_cast<size_t>(ms.src_end - s) >= len && std::memcmp(ms.capture[l].init, s, len) == 0) return s + len;
  return nullptr;
}

const char* DoMatch(MatchState& ms, const char* s, const char* p) {
  if (ms.depth_left-- == 0) luaL_error(ms.L, "pattern too complex");
  Tick(ms);
  while (p != ms.p_end) {
    switch (*p) {
      case '(':
        s = p[1] == ')' ? StartCapture(ms, s, p + 2, kCapturePosition) : StartCapture(ms, s, p + 1, kCaptureUnfinished);
        goto done;
      case ')':
        s = EndCapture(ms, s, p + 1);
        goto done;
      case '$':
        if (p + 1 != ms.p_end) goto single;  // a '$' inside the pattern is a plain character
        s = s == ms.src_end ? s : nullptr;
        goto done;
      case '%':
        switch (p[1]) {
          case 'b':
            s = MatchBalance(ms, s, p + 2);
            if (s != nullptr) {
              p += 4;
              continue;
            }
            goto done;
          case 'f': {
            p += 2;
            if (*p != '[') luaL_error(ms.L, "missing '[' after '%%f' in pattern");
            const char* ep = ClassEnd(ms, p);
            int previous = s == ms.src_init ? '\0' : U(*(s - 1));
            int current = s < ms.src_end ? U(*s) : '\0';
            if (!MatchBracketClass(previous, p, ep - 1) && MatchBracketClass(current, p, ep - 1)) {
              p = ep;
              continue;
            }
            s = nullptr;
            goto done;
          }
          case '0': case '1': case '2': case '3': case '4':
          case '5': case '6': case '7': case '8': case '9':
            s = MatchCapture(ms, s, U(p[1]));
            if (s != nullptr) {
              p += 2;
              continue;
            }
            goto done;
          default:
            goto single;
        }
      default:
      single: {
        const char* ep = ClassEnd(ms, p);
        if (!SingleMatch(ms, s, p, ep)) {
          if (*ep == '*' || *ep == '?' || *ep == '-') {  // accepts an empty match
            p = ep + 1;
            continue;
          }
          s = nullptr;
        } else {
          switch (*ep) {
            case '?': {
              const char* res = DoMatch(ms, s + 1, ep + 1);
              if (res != nullptr) {
                s = res;
              } else {
                p = ep + 1;
                continue;
              }
              break;
            }
            case '+': s = MaxExpand(ms, s + 1, p, ep); break;
            case '*': s = MaxExpand(ms, s, p, ep); break;
            case '-': s = MinExpand(ms, s, p, ep); break;
            default:
              s++;
              p = ep;
              continue;
          }
        }
        goto done;
      }
    }
  }
done:
  ms.depth_left++;
  return s;
}

// ---- captures -----------------------------------------------------------------

// Pushes capture i (or the whole match s..e when there are no captures).
void PushOneCapture(MatchState& ms, int i, const char* s, const char* e) {
  if (i >= ms.level) {
    if (i != 0) luaL_error(ms.L, "invalid capture index %%%d", i + 1);
    lua_pushlstring(ms.L, s, static_cast<size_t>(e - s));
    return;
  }
  long len = ms.capture[i].len;
  if (len == kCaptureUnfinished) luaL_error(ms.L, "unfinished capture");
  if (len == kCapturePosition) {
    lua_pushinteger(ms.L, static_cast<lua_Integer>(ms.capture[i].init - ms.src_init) + 1);
  } else {
    lua_pushlstring(ms.L, ms.capture[i].init, static_cast<size_t>(len));
  }
}

// Pushes every capture (the whole match if the pattern has none and s is set).
int PushCaptures(MatchState& ms, const char* s, const char* e) {
  int n = (ms.level == 0 && s != nullptr) ? 1 : ms.level;
  luaL_checkstack(ms.L, n, "too many captures");
  for (int i = 0; i < n; i++) PushOneCapture(ms, i, s, e);
  return n;
}

void Prepare(MatchState& ms, lua_State* L, const char* s, size_t ls, const char* p, size_t lp) {
  ms.L = L;
  ms.ctx = &ContextOf(L);
  ms.src_init = s;
  ms.src_end = s + ls;
  ms.p_end = p + lp;
  ms.steps = 0;
  ms.next_check = kCheckEvery;
}

void Reset(MatchState& ms) {
  ms.level = 0;
  ms.depth_left = kMaxMatchDepth;
}

// Lua's rule for a start position: negative counts from the end, 0 is 1.
size_t StartIndex(lua_Integer pos, size_t len) {
  if (pos > 0) return static_cast<size_t>(pos);
  if (pos == 0) return 1;
  if (pos < -static_cast<lua_Integer>(len)) return 1;
  return len + static_cast<size_t>(pos) + 1;
}

bool HasSpecials(const char* p, size_t lp) {
  for (size_t i = 0; i < lp; i++) {
    if (p[i] != '\0' && std::strchr(kSpecials, p[i]) != nullptr) return true;
  }
  return false;
}

size_t FindPlain(lua_State* L, Context& ctx, std::string_view hay, std::string_view needle) {
  if (needle.empty()) return 0;
  if (needle.size() > hay.size()) return std::string_view::npos;
  uint64_t steps = 0, next_check = kCheckEvery;
  const char* begin = hay.data();
  const char* last = begin + (hay.size() - needle.size());
  for (const char* at = begin; at <= last;) {
    const void* hit = std::memchr(at, needle[0], static_cast<size_t>(last - at) + 1);
    if (hit == nullptr) return std::string_view::npos;
    at = static_cast<const char*>(hit);
    steps += needle.size();
    if (steps >= next_check) {
      next_check = steps + kCheckEvery;
      if (DeadlineReached(L, ctx)) luaL_error(L, ctx.timed_out ? "timed out" : "cancelled");
    }
    if (std::memcmp(at + 1, needle.data() + 1, needle.size() - 1) == 0) return static_cast<size_t>(at - begin);
    at++;
  }
  return std::string_view::npos;
}

// string.find and string.match.
int FindAux(lua_State* L, bool find) {
  size_t ls = 0, lp = 0;
  const char* s = luaL_checklstring(L, 1, &ls);
  const char* p = luaL_checklstring(L, 2, &lp);
  size_t init = StartIndex(luaL_optinteger(L, 3, 1), ls) - 1;
  if (init > ls) {
    luaL_pushfail(L);
    return 1;
  }
  if (find && (lua_toboolean(L, 4) || !HasSpecials(p, lp))) {
    size_t at = FindPlain(L, ContextOf(L), std::string_view(s + init, ls - init), std::string_view(p, lp));
    if (at != std::string_view::npos) {
      lua_pushinteger(L, static_cast<lua_Integer>(init + at + 1));
      lua_pushinteger(L, static_cast<lua_Integer>(init + at + lp));
      return 2;
    }
    luaL_pushfail(L);
    return 1;
  }
  MatchState ms;
  const char* s1 = s + init;
  bool anchor = *p == '^';
  if (anchor) {
    p++;
    lp--;
  }
  Prepare(ms, L, s, ls, p, lp);
  do {
    Reset(ms);
    if (const char* e = DoMatch(ms, s1, p)) {
      if (find) {
        lua_pushinteger(L, static_cast<lua_Integer>(s1 - s) + 1);
        lua_pushinteger(L, static_cast<lua_Integer>(e - s));
        return PushCaptures(ms, nullptr, nullptr) + 2;
      }
      return PushCaptures(ms, s1, e);
    }
  } while (s1++ < ms.src_end && !anchor);
  luaL_pushfail(L);
  return 1;
}

int Find(lua_State* L) { return FindAux(L, true); }
int Match(lua_State* L) { return FindAux(L, false); }

// ---- gmatch -------------------------------------------------------------------

struct GmatchState {
  const char* src;        // where the next search starts
  const char* p;          // the pattern
  const char* lastmatch;  // end of the last match (no empty match there again)
  MatchState ms;
};

int GmatchNext(lua_State* L) {
  auto* gm = static_cast<GmatchState*>(lua_touserdata(L, lua_upvalueindex(3)));
  gm->ms.L = L;  // the iterator may run in another coroutine than gmatch did
  gm->ms.ctx = &ContextOf(L);
  for (const char* src = gm->src; src <= gm->ms.src_end; src++) {
    Reset(gm->ms);
    const char* e = DoMatch(gm->ms, src, gm->p);
    if (e != nullptr && e != gm->lastmatch) {
      gm->src = gm->lastmatch = e;
      return PushCaptures(gm->ms, src, e);
    }
  }
  return 0;
}

int Gmatch(lua_State* L) {
  size_t ls = 0, lp = 0;
  const char* s = luaL_checklstring(L, 1, &ls);
  const char* p = luaL_checklstring(L, 2, &lp);
  size_t init = StartIndex(luaL_optinteger(L, 3, 1), ls) - 1;
  if (init > ls) init = ls + 1;  // after the end: nothing to find
  lua_settop(L, 2);               // s and p stay alive as upvalues
  auto* gm = static_cast<GmatchState*>(lua_newuserdatauv(L, sizeof(GmatchState), 0));
  Prepare(gm->ms, L, s, ls, p, lp);
  gm->src = s + init;
  gm->p = p;
  gm->lastmatch = nullptr;
  lua_pushcclosure(L, GmatchNext, 3);
  return 1;
}

// ---- gsub ---------------------------------------------------------------------

// Appends the string replacement `repl` for the match s..e (%0-%9, %%).
void AddString(MatchState& ms, luaL_Buffer* b, const char* s, const char* e) {
  lua_State* L = ms.L;
  size_t l = 0;
  const char* news = lua_tolstring(L, 3, &l);
  Tick(ms, l);
  const char* end = news + l;
  for (const char* p; (p = static_cast<const char*>(std::memchr(news, '%', static_cast<size_t>(end - news)))) != nullptr;) {
    luaL_addlstring(b, news, static_cast<size_t>(p - news));
    p++;  // the character after '%'
    if (p >= end || !(*p == '%' || std::isdigit(U(*p)))) {
      luaL_error(L, "invalid use of '%c' in replacement string", '%');
    }
    if (*p == '%') {
      luaL_addchar(b, '%');
    } else if (*p == '0') {
      luaL_addlstring(b, s, static_cast<size_t>(e - s));
    } else {
      PushOneCapture(ms, *p - '1', s, e);
      luaL_tolstring(L, -1, nullptr);
      lua_remove(L, -2);
      luaL_addvalue(b);
    }
    news = p + 1;
  }
  luaL_addlstring(b, news, static_cast<size_t>(end - news));
}

void AddValue(MatchState& ms, luaL_Buffer* b, const char* s, const char* e, int type) {
  lua_State* L = ms.L;
  switch (type) {
    case LUA_TFUNCTION: {
      lua_pushvalue(L, 3);
      int n = PushCaptures(ms, s, e);
      lua_call(L, n, 1);
      break;
    }
    case LUA_TTABLE:
      PushOneCapture(ms, 0, s, e);
      lua_gettable(L, 3);
      break;
    default:
      AddString(ms, b, s, e);
      return;
  }
  if (!lua_toboolean(L, -1)) {  // nil or false: keep the original text
    lua_pop(L, 1);
    luaL_addlstring(b, s, static_cast<size_t>(e - s));
  } else if (!lua_isstring(L, -1)) {
    luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
  } else {
    luaL_addvalue(b);
  }
}

int Gsub(lua_State* L) {
  size_t srcl = 0, lp = 0;
  const char* src = luaL_checklstring(L, 1, &srcl);
  const char* p = luaL_checklstring(L, 2, &lp);
  const char* lastmatch = nullptr;
  int type = lua_type(L, 3);
  lua_Integer max_s = luaL_optinteger(L, 4, static_cast<lua_Integer>(srcl) + 1);
  bool anchor = *p == '^';
  lua_Integer n = 0;
  luaL_argexpected(L, type == LUA_TNUMBER || type == LUA_TSTRING || type == LUA_TFUNCTION || type == LUA_TTABLE, 3,
                   "string/function/table");
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  if (anchor) {
    p++;
    lp--;
  }
  MatchState ms;
  Prepare(ms, L, src, srcl, p, lp);
  while (n < max_s) {
    Reset(ms);
    const char* e = DoMatch(ms, src, p);
    if (e != nullptr && e != lastmatch) {
      n++;
      AddValue(ms, &b, src, e, type);
      src = lastmatch = e;
    } else if (src < ms.src_end) {
      luaL_addchar(&b, *src++);
    } else {
      break;
    }
    if (anchor) break;
  }
  luaL_addlstring(&b, src, static_cast<size_t>(ms.src_end - src));
  luaL_pushresult(&b);
  lua_pushinteger(L, n);
  return 2;
}

}  // namespace

size_t BoundedFind(lua_State* L, std::string_view hay, std::string_view needle) {
  return FindPlain(L, ContextOf(L), hay, needle);
}

void InstallBoundedPatterns(lua_State* L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, LUA_STRLIBNAME);
  static const luaL_Reg kFunctions[] = {
      {"find", Find}, {"match", Match}, {"gmatch", Gmatch}, {"gsub", Gsub}, {nullptr, nullptr}};
  luaL_setfuncs(L, kFunctions, 0);
  lua_pop(L, 2);
}

}  // namespace accelopt::lua::detail
