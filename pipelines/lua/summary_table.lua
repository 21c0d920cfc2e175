-- Formats the profile results as a fixed-width text table: one row per
-- kernel with correctness, estimated latency, % of peak and the busiest
-- engine (the likely bottleneck), or the error kind when it failed.
local function cell(value)
  if value == nil or value == accel.null then return "-" end
  return tostring(value)
end

local function format_table(header, rows)
  local widths = {}
  for i, h in ipairs(header) do widths[i] = #h end
  for _, row in ipairs(rows) do
    for i, v in ipairs(row) do widths[i] = math.max(widths[i], #v) end
  end
  local lines = {}
  local function line(values)
    local parts = {}
    for i, v in ipairs(values) do parts[i] = v .. string.rep(" ", widths[i] - #v) end
    lines[#lines + 1] = table.concat(parts, "  "):gsub("%s+$", "")
  end
  line(header)
  local rule = {}
  for i, w in ipairs(widths) do rule[i] = string.rep("-", w) end
  line(rule)
  for _, row in ipairs(rows) do line(row) end
  return table.concat(lines, "\n") .. "\n"
end

-- "backend: ..." naming the backend(s) that ran, the SDK version and why
-- (the profile results' backend, sdk_version and backend_reason).
local function backend_line(results)
  local seen, names = {}, {}
  for _, r in ipairs(results) do
    if type(r.backend) == "string" and not seen[r.backend] then
      seen[r.backend] = true
      local name = r.backend
      if type(r.sdk_version) == "string" then name = name .. " (Neuron SDK " .. r.sdk_version .. ")" end
      if type(r.backend_reason) == "string" then name = name .. ": " .. r.backend_reason end
      names[#names + 1] = name
    end
  end
  if #names == 0 then return "" end
  return "backend: " .. table.concat(names, "; ") .. "\n"
end

return {
  description = "Format profile results as a readable summary table (problem, correct, latency, % of peak, bottleneck).",
  params = {
    results = { type = "any", required = true, doc = "outputs of the profile for_each" },
    target = { type = "string", default = "trn1", enum = { "trn1", "trn2" }, doc = "target named in the table title" },
  },
  outputs = {
    text = { type = "string", doc = "the summary table (title line, header, one row per kernel)" },
    correct = { type = "integer", doc = "correct kernels" },
    total = { type = "integer", doc = "kernels in the results" },
  },
  run = function(input)
    local results = input.with.results
    if type(results) ~= "table" then results = {} end
    local rows, correct, peak_sum, peak_n = {}, 0, 0, 0
    for _, r in ipairs(results) do
      local case = r.case or r.item or {}
      local err = r.error
      local metrics = r.metrics or {}
      local peak = r.peak or {}
      local latency = "-"
      if type(r.latency_ms) == "number" then
        latency = string.format("%.4f%s", r.latency_ms, r.estimated and "*" or "")
      end
      local percent = "-"
      if type(peak.percent_of_peak) == "number" then
        percent = string.format("%.1f", peak.percent_of_peak)
        if r.correct then peak_sum, peak_n = peak_sum + peak.percent_of_peak, peak_n + 1 end
      end
      if r.correct then correct = correct + 1 end
      rows[#rows + 1] = {
        cell(case.problem), cell(case.case_id), r.correct and "yes" or "NO", latency, percent,
        cell(metrics.bottleneck),
        (err ~= nil and err ~= accel.null) and cell(err.kind) or "",
      }
    end
    table.sort(rows, function(a, b) return a[1] .. a[2] < b[1] .. b[2] end)
    local text = string.format("NKIBench profile (%s): %d/%d correct; * = estimated by the NKI emulator\n",
      input.with.target, correct, #results)
    text = text .. backend_line(results) .. "\n"
    text = text .. format_table({ "problem", "case", "correct", "latency_ms", "%peak", "bottleneck", "error" }, rows)
    if peak_n > 0 then
      -- the mean over the correct kernels (docs/nki-emulator.md: AccelOpt's paper reports its trn2
      -- kernels at 45 % of peak before and 59 % after optimisation; trn2 constants are unvalidated)
      text = text .. string.format("\nmean %%peak over %d correct kernels: %.1f%s\n", peak_n, peak_sum / peak_n,
        input.with.target == "trn2" and " (trn2 peak constants unvalidated; AccelOpt's paper: 45 -> 59 on trn2)" or "")
    end
    return { text = text, correct = correct, total = #results }
  end,
}
