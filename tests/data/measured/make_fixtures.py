#!/usr/bin/env python3
# tests/data/measured/make_fixtures.py -- writes the small measured-run fixtures beside it.
# They are FORMAT FIXTURES, NOT MEASUREMENTS: made-up numbers laid out exactly as the tools
# write them (key names and summary definitions from vLLM vllm/benchmarks/serve.py
# `calculate_metrics` / result_json, SGLang python/sglang/bench_serving.py `calculate_metrics`
# / the JSONL line, inference-perf reportgen `summarize_requests` / per-request report), with
# the summary figures computed here the way those tools compute them (numpy's linear
# percentiles), so tests/test_measured.c can recompute them through the C reader and compare.
import json, math, os, random

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(7)


def pct(v, p):                     # numpy.percentile, linear
    v = sorted(v)
    if not v:
        return 0.0
    pos = p / 100 * (len(v) - 1)
    i = int(pos)
    f = pos - i
    return v[i] * (1 - f) + v[i + 1] * f if i + 1 < len(v) else v[i]


def mean(v):
    return sum(v) / len(v) if v else 0.0


def std(v):
    m = mean(v)
    return math.sqrt(sum((x - m) ** 2 for x in v) / len(v)) if v else 0.0


def requests(n, fail_at):
    out, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(2.0)
        inp = rng.randint(100, 900)
        ok = i not in fail_at
        outl = rng.randint(8, 40) if ok else 0
        ttft = 0.02 + inp * 4e-5 + rng.random() * 0.01 if ok else 0.0
        itl = [0.006 + rng.random() * 0.004 for _ in range(outl - 1)] if ok else []
        lat = ttft + sum(itl) if ok else 0.0
        out.append(dict(start=t, inp=inp, out=outl, ttft=ttft, itl=itl, lat=lat, ok=ok))
    return out


def ms_stats(res, name, v, ps):
    res["mean_%s_ms" % name] = mean(v) * 1000
    res["median_%s_ms" % name] = pct(v, 50) * 1000
    res["std_%s_ms" % name] = std(v) * 1000
    for p in ps:
        res["p%s_%s_ms" % (p, name)] = pct(v, p) * 1000


# ---- vLLM `vllm bench serve --save-result --save-detailed --metric-percentiles 50,90,99
#      --percentile-metrics ttft,tpot,itl,e2el --metadata tensor_parallel_size=2 ...`
rs = requests(12, {5})
ok = [r for r in rs if r["ok"]]
dur = rs[-1]["start"] + 1.5
ttfts = [r["ttft"] for r in ok]
tpots = [(r["lat"] - r["ttft"]) / (r["out"] - 1) for r in ok if r["out"] > 1]
itls = [g for r in ok for g in r["itl"]]
e2e = [r["lat"] for r in ok]
tin = sum(r["inp"] for r in ok)
tout = sum(r["out"] for r in ok)
res = {
    "date": "20261201-101500", "endpoint_type": "vllm", "backend": "vllm", "label": None,
    "model_id": "meta-llama/Llama-3.1-8B-Instruct", "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
    "num_prompts": len(rs), "tensor_parallel_size": "2", "max_num_seqs": "64",
    "enable_prefix_caching": "false", "hardware": "h100-sxm",
    "request_rate": 2.0, "burstiness": 1.0, "max_concurrency": 8,
    "duration": dur, "completed": len(ok), "failed": len(rs) - len(ok),
    "total_input_tokens": tin, "total_output_tokens": tout,
    "request_throughput": len(ok) / dur, "request_goodput": None,
    "output_throughput": tout / dur, "total_token_throughput": (tin + tout) / dur,
    "input_lens": [r["inp"] for r in rs], "output_lens": [r["out"] for r in rs],
    "ttfts": [r["ttft"] for r in rs], "itls": [r["itl"] for r in rs],
    "latencies": [r["lat"] for r in rs], "start_times": [1000.0 + r["start"] for r in rs],
    "errors": ["" if r["ok"] else "Server disconnected" for r in rs],
    "max_output_tokens_per_s": 50.0, "max_concurrent_requests": 3, "rtfx": 0.0,
}
ms_stats(res, "ttft", ttfts, [50, 90, 99])
ms_stats(res, "tpot", tpots, [50, 90, 99])
ms_stats(res, "itl", itls, [50, 90, 99])
ms_stats(res, "e2el", e2e, [50, 90, 99])
json.dump(res, open(os.path.join(HERE, "vllm_small.json"), "w"))

# ---- SGLang `python -m sglang.bench_serving ... --output-file F` twice (appended): a
#      summary-only run at request_rate inf, then a run with --output-details at 4 req/s.
lines = []
for detail, rate in ((False, float("inf")), (True, 4.0)):
    rs = requests(10, {3} if detail else set())
    ok = [r for r in rs if r["ok"]]
    dur = rs[-1]["start"] + 1.0
    ttfts = [r["ttft"] for r in ok]
    tpots = [(r["lat"] - r["ttft"]) / (r["out"] - 1) for r in ok if r["out"] > 1]
    itls = [g for r in ok for g in r["itl"]]
    e2e = [r["lat"] for r in ok]
    tin = sum(r["inp"] for r in ok)
    tout = sum(r["out"] for r in ok)
    res = {
        "backend": "sglang", "dataset_name": "random", "request_rate": rate,
        "max_concurrency": None, "sharegpt_output_len": None, "random_input_len": 512,
        "random_output_len": 32, "random_range_ratio": 0.5,
        "duration": dur, "completed": len(ok), "total_input_tokens": tin,
        "total_output_tokens": tout, "total_output_tokens_retokenized": tout,
        "request_throughput": len(ok) / dur, "input_throughput": tin / dur,
        "output_throughput": tout / dur,
        "mean_e2e_latency_ms": mean(e2e) * 1000, "median_e2e_latency_ms": pct(e2e, 50) * 1000,
        "std_e2e_latency_ms": std(e2e) * 1000, "p99_e2e_latency_ms": pct(e2e, 99) * 1000,
    }
    ms_stats(res, "ttft", ttfts, [99])
    ms_stats(res, "tpot", tpots, [99])
    ms_stats(res, "itl", itls, [95, 99])
    res["concurrency"] = sum(e2e) / dur
    res["accept_length"] = None
    if detail:
        res.update({
            "input_lens": [r["inp"] for r in rs], "output_lens": [r["out"] for r in rs],
            "ttfts": [r["ttft"] for r in rs], "itls": [r["itl"] for r in rs],
            "generated_texts": ["x" * r["out"] for r in rs],
            "errors": ["" if r["ok"] else "Traceback: ClientConnectorError" for r in rs],
        })
    lines.append(json.dumps(res))   # json.dumps writes inf as Infinity, as SGLang's file has
open(os.path.join(HERE, "sglang_small.jsonl"), "w").write("\n".join(lines) + "\n")

# ---- inference-perf results folder with the per-request report (report.request_lifecycle
#      per_request: true), one constant-rate stage of a shared-prefix workload.
d = os.path.join(HERE, "ip_small", "results")
os.makedirs(d, exist_ok=True)
rs = requests(16, {9})
per = []
for r in rs:
    st = 50.0 + r["start"]
    times = [st + r["ttft"]]
    for g in r["itl"]:
        times.append(times[-1] + g)
    end = times[-1] + 0.001 if r["ok"] else st + 300.0
    per.append({"start_time": st, "end_time": end, "request": "{}", "response": "",
                "info": {"input_tokens": r["inp"], "output_tokens": r["out"],
                         "output_token_times": times if r["ok"] else []},
                "error": None if r["ok"] else {"error_type": "TimeoutError", "error_msg": ""}})
json.dump(per, open(os.path.join(d, "per_request_lifecycle_metrics.json"), "w"), indent=2)

PS = [0.1, 1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9]


def summ(v):
    if not v:
        return None
    s = {"mean": mean(v), "min": min(v), "max": max(v)}
    for p in PS:
        s["median" if p == 50 else "p%g" % p] = pct(v, p)
    return s


okp = [p for p in per if p["error"] is None]
bad = [p for p in per if p["error"] is not None]
total = max(p["end_time"] for p in per) - min(p["start_time"] for p in per)
ttft = [p["info"]["output_token_times"][0] - p["start_time"] for p in okp]
tpot = [(p["info"]["output_token_times"][-1] - p["info"]["output_token_times"][0]) /
        (len(p["info"]["output_token_times"]) - 1) for p in okp]
itl = [b - a for p in okp for a, b in zip(p["info"]["output_token_times"], p["info"]["output_token_times"][1:])]
lat = [p["end_time"] - p["start_time"] for p in okp]
ntpot = [(p["end_time"] - p["start_time"]) / p["info"]["output_tokens"] for p in okp]
summary = {
    "load_summary": {"count": len(per), "schedule_delay": summ([0.0] * len(per))},
    "successes": {
        "count": len(okp),
        "latency": {"request_latency": summ(lat), "normalized_time_per_output_token": summ(ntpot),
                    "time_per_output_token": summ(tpot), "time_to_first_token": summ(ttft),
                    "inter_token_latency": summ(itl)},
        "throughput": {
            "input_tokens_per_sec": sum(p["info"]["input_tokens"] for p in okp) / total,
            "output_tokens_per_sec": sum(p["info"]["output_tokens"] for p in okp) / total,
            "total_tokens_per_sec": sum(p["info"]["input_tokens"] + p["info"]["output_tokens"] for p in okp) / total,
            "requests_per_sec": len(okp) / total},
        "prompt_len": summ([float(p["info"]["input_tokens"]) for p in okp]),
        "output_len": summ([float(p["info"]["output_tokens"]) for p in okp]),
    },
    "failures": {"count": len(bad), "request_latency": summ([p["end_time"] - p["start_time"] for p in bad]),
                 "prompt_len": summ([float(p["info"]["input_tokens"]) for p in bad])},
}
json.dump(summary, open(os.path.join(d, "summary_lifecycle_metrics.json"), "w"), indent=2)
open(os.path.join(d, "config.yaml"), "w").write("""api:
  type: completion
  streaming: true
data:
  type: shared_prefix
  shared_prefix:
    num_groups: 2
    num_prompts_per_group: 3
    system_prompt_len: 128
    question_len: 300
    output_len: 32
load:
  type: constant
  interval: 1.0
  stages:
  - rate: 2.0
    duration: 8
  num_workers: 4
  worker_max_concurrency: 10
  request_timeout: null
server:
  type: vllm
  model_name: meta-llama/Llama-3.1-8B-Instruct
  ignore_eos: true
""")
open(os.path.join(HERE, "ip_small", "exp-config.yaml"), "w").write("""model: meta-llama/Llama-3.1-8B-Instruct
tensor_parallelism: 1
max_model_len: 8192
max_num_batched_tokens: 4096
max_num_seqs: 256
""")
