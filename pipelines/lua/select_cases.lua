-- Keeps the benchmark cases whose problem is listed in `problems`
-- (all of them when the list is empty). Unknown names are an error, so a
-- typo in --set vars.problems=[...] does not silently profile nothing.
local function index_of(list, value)
  for i, v in ipairs(list) do
    if v == value then return i end
  end
  return nil
end

return {
  description = "Filter NKIBench cases by problem name (empty list = keep all).",
  params = {
    cases = { type = "array", required = true, doc = "cases from native:nkibench_load" },
    problems = { type = "array", default = accel.array({}), doc = "problem names to keep; empty keeps all" },
  },
  outputs = {
    cases = { type = "array", doc = "the kept cases, in their original order" },
    count = { type = "integer", doc = "number of kept cases" },
  },
  run = function(input)
    local cases = input.with.cases
    local wanted = input.with.problems or {}
    local known = {}
    for _, c in ipairs(cases) do
      if not index_of(known, c.problem) then known[#known + 1] = c.problem end
    end
    for _, name in ipairs(wanted) do
      if not index_of(known, name) then
        accel.fail("config_error", "unknown problem '" .. tostring(name) .. "'; known: " .. table.concat(known, ", "))
      end
    end
    local kept = accel.array({})
    for _, c in ipairs(cases) do
      if #wanted == 0 or index_of(wanted, c.problem) then kept[#kept + 1] = c end
    end
    accel.info(string.format("profiling %d of %d cases", #kept, #cases))
    return { cases = kept, count = #kept }
  end,
}
