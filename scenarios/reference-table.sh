#!/bin/sh
# scenarios/reference-table.sh [OUT] -- runs scenarios/deepseek-reference.yaml (into OUT, default
# out/ref) and prints its published figures beside the run's: published | simulated | gap |
# input or output | what it rests on, then margin and payback at both ends of the published
# all-in cost ($5 and $8 per accelerator-hour) and their sensitivity to the cache-hit rate and
# to utilisation, at the operating point (summary.json: steady.economics.gpu_hour_range,
# steady.economics.sensitivity; the whole run's economics when the run has no steady window).
# The README's reference section is this script's output (scripts/readme-examples.sh).
set -e
KVF=${KVF:-build/kvfleet}
OUT=${1:-out/ref}
"$KVF" run scenarios/deepseek-reference.yaml -q --no-report --force -o "$OUT" >/dev/null
jq -r '
  def f: if . == null then "-" elif (. | type) != "number" then tostring
         elif (. | fabs) >= 1e12 then "\(. / 1e12 * 10 | round / 10) T"
         elif (. | fabs) >= 1e6 then "\(. / 1e6 * 100 | round / 100) M"
         elif (. | fabs) >= 1e4 then "\(. / 1e3 * 10 | round / 10) k"
         elif (. | fabs) >= 100 then "\(. | round)"
         else "\(. * 1000 | round / 1000)" end;
  (.steady.economics // .economics) as $e |
  "| figure | published | simulated | gap | role | rests on |",
  "|---|---:|---:|---:|---|---|",
  (.published[] | "| \(.name)\(if (.unit // "") != "" then " (\(.unit))" else "" end) | \(.value | f)\(if .high and .high != .value then "-\(.high | f)" else "" end) | \(.simulated | f) | \(if .gap_pct == null then "-" else "\(.gap_pct * 10 | round / 10) %" end) | \(.role) | \(.rests_on // "") |"),
  "",
  "| all-in cost (USD per accelerator-hour) | margin | cost / revenue per day (USD) |",
  "|---|---:|---:|",
  "| \($e.gpu_hour_range.low_usd) | \($e.gpu_hour_range.margin_at_low * 1000 | round / 10) % | \($e.gpu_hour_range.cost_per_day_usd_at_low | round) / \($e.revenue_per_day_usd | round) |",
  "| \($e.cost_per_gpu_hour_usd * 100 | round / 100) (midpoint + SSD) | \($e.margin * 1000 | round / 10) % | \($e.cost_per_day_usd | round) / \($e.revenue_per_day_usd | round) |",
  "| \($e.gpu_hour_range.high_usd) | \($e.gpu_hour_range.margin_at_high * 1000 | round / 10) % | \($e.gpu_hour_range.cost_per_day_usd_at_high | round) / \($e.revenue_per_day_usd | round) |",
  "",
  "payback \($e.payback_days | round) days (capex per GPU over the day'"'"'s cash margin; the rental price does not enter it)",
  "",
  "| cache-hit rate | margin | payback (days) |",
  "|---:|---:|---:|",
  ($e.sensitivity.hit_rate[] | select(.x == 0.5 or .x == 0.8 or .x == 0.9 or .x == 0.95 or .x == 0.99 or (.x * 100 | round) != (.x * 100)) | "| \(.x * 1000 | round / 10) % | \(.margin * 1000 | round / 10) % | \(.payback_days | round) |"),
  "",
  "| utilisation | margin | payback (days) |",
  "|---:|---:|---:|",
  ($e.sensitivity.utilization[] | select(.x == 0.3 or .x == 0.5 or .x == 0.7 or .x == 0.9 or (.x * 10 | round) != (.x * 10)) | "| \(.x * 1000 | round / 10) % | \(.margin * 1000 | round / 10) % | \(.payback_days | round) |")
' "$OUT/summary.json"
