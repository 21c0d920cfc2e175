-- Caps the candidates sent to profiling at a budget of evaluations per
-- problem (vars.budget of nkibench-optimize.yaml; 0 = no cap). Candidates are
-- taken in the executor's order until the problem's budget is used; the rest
-- are dropped (never profiled, not recorded). `used` is carried across
-- iterations; `exhausted` is true once every problem has used its budget.
return {
  description = "Keep at most `budget` profiled candidates per problem over the whole search (0 = unlimited).",
  params = {
    candidates = { type = "array", required = true, doc = "native:execute's candidates" },
    used = { type = "object", default = accel.object({}), doc = "case_name -> candidates profiled so far (carried)" },
    budget = { type = "integer", default = 0, minimum = 0, doc = "evaluations per problem; 0 = no cap" },
    cases = { type = "array", default = accel.array({}), doc = "every problem's case_name (for `exhausted`)" },
  },
  outputs = {
    candidates = { type = "array", doc = "the candidates to profile" },
    used = { type = "object", doc = "case_name -> candidates profiled so far, these included" },
    dropped = { type = "integer", doc = "candidates over the budget" },
    exhausted = { type = "boolean", doc = "every problem in `cases` has used its budget" },
  },
  run = function(input)
    local w = input.with
    local used = accel.object({})
    for k, v in pairs(w.used or {}) do used[k] = v end
    local kept = accel.array({})
    local dropped = 0
    for _, c in ipairs(w.candidates) do
      local n = used[c.case_name] or 0
      if w.budget <= 0 or n < w.budget then
        kept[#kept + 1] = c
        used[c.case_name] = n + 1
      else
        dropped = dropped + 1
      end
    end
    local exhausted = w.budget > 0 and #w.cases > 0
    for _, name in ipairs(w.cases) do
      if (used[name] or 0) < w.budget then exhausted = false end
    end
    if dropped > 0 then accel.info(string.format("budget: %d candidate(s) over the budget of %d dropped", dropped, w.budget)) end
    return { candidates = kept, used = used, dropped = dropped, exhausted = exhausted }
  end,
}
