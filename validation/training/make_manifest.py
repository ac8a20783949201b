#!/usr/bin/env python3
# validation/training/make_manifest.py -- writes manifest.csv beside it from the experiment
# folders (exp-config.yaml, results/config.yaml, results/*_lifecycle_metrics.json). Run it again
# after adding an experiment; tests/test_measured.c checks the C reader against its figures.
#
# overloaded = the run had client time-outs (failures) or a mean TTFT above 10 s: the server
# could not keep up with the offered rate, so queues grew for the whole run.
import csv, json, os, sys, yaml

HERE = os.path.dirname(os.path.abspath(__file__))
HARDWARE = "h100-sxm"   # inference-sim/training DESIGN.md: "vLLM on H100 SXM GPUs"

rows = []
for e in sorted(os.listdir(HERE)):
    d = os.path.join(HERE, e)
    if not os.path.isdir(d):
        continue
    exp = yaml.safe_load(open(os.path.join(d, "exp-config.yaml")))
    cfg = yaml.safe_load(open(os.path.join(d, "results", "config.yaml")))
    s = json.load(open(os.path.join(d, "results", "summary_lifecycle_metrics.json")))
    lat = s["successes"]["latency"]
    fail = s["failures"]
    sp = cfg["data"]["shared_prefix"]
    kind = e.rsplit("-", 1)[1]
    ttft = lat["time_to_first_token"]["mean"]
    rows.append({
        "experiment": e,
        "model": exp["model"],
        "hardware": HARDWARE,
        "tp": exp["tensor_parallelism"],
        "workload": kind,
        "max_num_seqs": exp["max_num_seqs"],
        "max_num_batched_tokens": exp["max_num_batched_tokens"],
        "max_model_len": exp["max_model_len"],
        "prefix_caching": "on",
        "rates_rps": ";".join("%g" % st["rate"] for st in cfg["load"]["stages"]),
        "durations_s": ";".join("%g" % st["duration"] for st in cfg["load"]["stages"]),
        "prompts": sp["num_groups"] * sp["num_prompts_per_group"],
        "system_prompt_len": sp["system_prompt_len"],
        "question_len": sp["question_len"],
        "output_len": sp["output_len"],
        "requests": s["load_summary"]["count"],
        "successes": s["successes"]["count"],
        "failures": fail["count"],
        "overloaded": "yes" if fail["count"] > 0 or ttft > 10 else "no",
        "ttft_mean_s": "%.6g" % ttft,
        "ttft_p90_s": "%.6g" % lat["time_to_first_token"]["p90"],
        "itl_mean_s": "%.6g" % lat["inter_token_latency"]["mean"],
        "e2e_mean_s": "%.6g" % lat["request_latency"]["mean"],
    })

w = csv.DictWriter(open(os.path.join(HERE, "manifest.csv"), "w", newline=""), fieldnames=list(rows[0]),
                   lineterminator="\n")
w.writeheader()
w.writerows(rows)
print("%d experiments" % len(rows), file=sys.stderr)
