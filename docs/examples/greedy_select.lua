-- A search strategy: greedy selection, a drop-in for `native:select` in
-- pipelines/nkibench-optimize.yaml (docs/extending.md, "Search strategy").
-- Per problem it keeps only the fastest kernel seen so far (beam width 1),
-- instead of AccelOpt's beam of B. Same inputs and outputs as native:select:
-- the loop's `carry` wiring does not change.
--
--   - id: select
--     uses: lua:../docs/examples/greedy_select.lua
--     with: {beam: "${{ carry.beam }}", records: "${{ stages.fixer.outputs }}", best: "${{ carry.best }}"}
--     carry: {beam: "${{ outputs.beam }}", best: "${{ outputs.best }}"}

-- records may be a list or the producing stage's outputs ({records = [...]}).
local function list_of(value, key)
  if accel.is_null(value) then return accel.array() end
  if value[key] ~= nil then return value[key] end
  return value
end

local function faster(a, b)
  return type(a.latency_ms) == "number" and (type(b) ~= "table" or type(b.latency_ms) ~= "number"
                                             or a.latency_ms < b.latency_ms)
end

return {
  description = "Greedy search strategy: per problem, the fastest correct kernel so far is the whole beam.",
  params = {
    beam = { type = "any", required = true, doc = "the current beam" },
    records = { type = "any", required = true, doc = "scored records of this iteration (list, or score/fixer outputs)" },
    best = { type = "any", default = {}, doc = "case_name -> best kernel so far" },
    beam_width = { type = "integer", default = 1, doc = "ignored: greedy keeps one kernel per problem" },
  },
  outputs = {
    beam = { type = "array", doc = "the next beam (one kernel per problem)" },
    best = { type = "object", doc = "case_name -> best kernel so far" },
    improved = { type = "array", doc = "cases whose best improved this iteration" },
  },
  run = function(input)
    local best = accel.object()
    for case_name, kernel in pairs(list_of(input.with.best, "best")) do best[case_name] = kernel end
    for _, kernel in ipairs(list_of(input.with.beam, "beam")) do
      if faster(kernel, best[kernel.case_name]) then best[kernel.case_name] = kernel end
    end
    local improved = accel.array()
    for _, record in ipairs(list_of(input.with.records, "records")) do
      if record.status == "ok" and faster(record, best[record.case_name]) then
        best[record.case_name] = record
        if not accel.contains(improved, record.case_name) then improved[#improved + 1] = record.case_name end
      end
    end
    local beam = accel.array()
    for _, case_name in ipairs(accel.keys(best)) do beam[#beam + 1] = best[case_name] end
    accel.info(string.format("greedy select: %d problems, %d improved", accel.len(beam), accel.len(improved)))
    return { beam = beam, best = best, improved = improved }
  end,
}
