// plugins/profile/screening.h - screen-then-confirm profiling of search
// candidates (docs/search.md, "Screen, then confirm").
//
// An NKI kernel's instruction stream does not depend on its data, so the
// latency estimated on the hidden input set is exact after one run; what more
// input sets buy is confidence in correctness. A screen checks the first
// `screen_seeds` published seeds plus a hidden set (the timed run); only a
// candidate whose screened latency is below `confirm_below_ms` (one that could
// become a beam member, an incumbent or a best) is checked again on the
// remaining published seeds (with a fresh hidden set, untimed). Both are the
// same isolated profile call with another `seeds` list: same sandbox, same
// anti-cheat rules. Without the plugin SDK (only nlohmann::json).
#pragma once

#include <functional>
#include <optional>

#include <nlohmann/json.hpp>

namespace accelopt_profile {

/// How a profile stage checks one kernel.
struct ScreenPlan {
  int screen_seeds = 0;                    ///< 0 = every seed in one call ("full")
  bool hidden_only = false;                ///< with screen_seeds >= 1: the screen runs the hidden set alone
  std::optional<double> confirm_below_ms;  ///< confirm iff the screened latency (ms) < this; nullopt = always
};

/// One profile call: takes a profile_kernel request, returns its result (a
/// profile_kernel result object, docs/architecture.md). May throw; the caller's
/// exceptions pass through.
using ProfileCall = std::function<nlohmann::json(const nlohmann::json& request)>;

/// Checks a kernel by `plan` with `call`. `request` is a profile_kernel request
/// whose `seeds` (a non-empty array of integers) lists every published seed.
///
/// With plan.screen_seeds == 0, or >= the number of seeds without
/// plan.hidden_only: one call with every seed; the result gets validation
/// "full". Otherwise the screen is the call with the first screen_seeds seeds
/// (timed as requested), or with plan.hidden_only the call with no published
/// seed (`hidden_only: true`: the hidden set alone, one emulated run; its
/// confirmation then checks every published seed). A screened kernel
/// that is correct with a latency below confirm_below_ms (or any correct one
/// when it is nullopt) is confirmed: a second call with the remaining seeds and
/// `timing: false` (its latency stays the screen's, measured on hidden inputs).
/// The result is the screen's with:
///   validation       "full" | "screened" | "confirmed"
///   validated_seeds  the published seeds passed (empty when the check failed)
///   screen           {seeds, wall_s, timings} (screened calls only)
///   confirm          {seeds, below_ms, correct, wall_s, rel_errors, error, timings}
///                    (confirmed or refused calls only)
/// A refused confirmation makes the result failed: correct false, latency_ms
/// null (kept as screened_latency_ms), error = the confirm's error with
/// "confirmation on seeds [...] failed: " before its message, validation
/// "screened". rel_errors lists the screen's then the confirm's per-seed errors.
/// Throws std::invalid_argument when plan.screen_seeds < 0 or `seeds` is not a
/// non-empty array.
nlohmann::json ScreenThenConfirm(const nlohmann::json& request, const ScreenPlan& plan, const ProfileCall& call);

}  // namespace accelopt_profile
