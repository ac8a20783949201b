#!/usr/bin/env python3
"""The prefill step shape of DeepSeek's production point under real prompt-length mixes.

DeepSeek's inference system overview (2025-03-01) publishes, for one day of serving:
  - the mean KV cache length per output token, K = 4,989 (decode);
  - input and output tokens, 608 B and 168 B (ratio r = 3.619);
  - the share of input tokens that hit the on-disk KV cache, h = 342 B / 608 B = 56.3 %.
It does not publish the prompt-length mix. A prefill step's attention work per computed token
grows with the token's position, so a mix of lengths costs more per token than one length
of the same mean (the token-weighted position is E[P^2] / E[P], not E[P]).

For each bundled production trace with lengths, this script scales its prompt lengths by alpha
and its output lengths by beta (each trace's shapes kept) so that the scaled trace has DeepSeek's
r and K:
    r = alpha * sum(P) / (beta * sum(O))
    K = sum(O * (alpha P + (beta O - 1) / 2)) / sum(O)      (beta O output tokens each)
and, with h of every prompt cached (only the aggregate is published), prints the mean position
(tokens before it) of a computed token, weighted by computed tokens:
    pos = alpha * (1 + h) / 2 * sum(P^2) / sum(P)
and the context of one chunk of n computed tokens with the same attention FLOPs (a chunk of n
new tokens after c cached spans c + n/2 tokens on average): c = pos - n / 2, with n = 2,180
computed tokens per GPU per step (the point's batch).

Usage: scripts/deepseek-prefill-shape.py [TRACES_DIR]   (default: the repository's traces/data,
then ../shared/traces for a trace not there). The check line of
scenarios/published/deepseek-v3-h800-prefill.yaml takes the ShareGPT row's context (the
chat mix least favourable to the point; test_stepmodels re-derives it from the same file).
"""
import csv
import json
import os
import sys

K = 4989.0            # mean KV cache length per output token
R = 608.0 / 168.0     # input tokens / output tokens over the day
H = 342.0 / 608.0     # on-disk KV cache hits / input tokens
N = 2180              # computed tokens per GPU per step (the point's batch)


def shape(lengths):
    P = [float(p) for p, _ in lengths]
    O = [float(o) for _, o in lengths]
    sP, sO = sum(P), sum(O)
    sOP = sum(o * p for p, o in zip(P, O))
    sOO = sum(o * o for o in O)
    sPP = sum(p * p for p in P)
    beta = (K + 0.5) / (R * sOP / sP + sOO / (2 * sO))
    alpha = R * beta * sO / sP
    pos = alpha * (1 + H) / 2 * sPP / sP
    return {
        "requests": len(P),
        "alpha": alpha,
        "beta": beta,
        "mean_prompt": alpha * sP / len(P),
        "mean_output": beta * sO / len(P),
        "pos": pos,
        "context": round(pos - N / 2),
    }


def mooncake(path):
    with open(path) as f:
        return [(d["input_length"], d["output_length"]) for d in map(json.loads, f)]


def mooncake_own_hits(path, alpha):
    """Mooncake's own prefix reuse in place of h on every prompt: a prompt's cached part is its
    longest run of leading 512-token blocks seen before in the hour (no eviction), lengths
    scaled by alpha. Returns (hit share of input tokens, mean position of a computed token)."""
    seen, tin, thit, num, den = set(), 0, 0, 0.0, 0
    with open(path) as f:
        for d in map(json.loads, f):
            h, n = d["hash_ids"], d["input_length"]
            k = 0
            while k < len(h) and h[k] in seen:
                k += 1
            cached = min(k * 512, n)
            seen.update(h)
            tin += n
            thit += cached
            num += (n - cached) * (cached + n) / 2
            den += n - cached
    return thit / tin, alpha * num / den


def azure(path):
    with open(path, newline="") as f:
        return [(int(d["ContextTokens"]), int(d["GeneratedTokens"])) for d in csv.DictReader(f)]


def sharegpt(path):
    with open(path, newline="") as f:
        return [(int(d["num_prefill_tokens"]), int(d["num_decode_tokens"]))
                for d in csv.DictReader(f)]


def agentic(path):
    out = []

    def walk(reqs):
        for q in reqs:
            if q.get("type") == "subagent":
                walk(q.get("requests", []))
            else:
                out.append((q["in"], q["out"]))

    with open(path) as f:
        for line in f:
            walk(json.loads(line)["requests"])
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = sys.argv[1:] or [os.path.join(here, "..", "traces", "data"),
                            os.path.join(here, "..", "..", "shared", "traces")]
    traces = [
        ("mooncake_conversation.jsonl", "Kimi chat (Mooncake)", mooncake),
        ("azure2023_conv.csv", "Azure conversation 2023", azure),
        ("sarathi_sharegpt8k_lengths.csv", "ShareGPT conversations", sharegpt),
        ("weka_agentic_dev.jsonl", "agentic coding sessions", agentic),
    ]
    # one fixed length: P + (O - 1) / 2 = K and P = r O
    o1 = (K + 0.5) / (R + 0.5)
    p1 = R * o1
    pos1 = (1 + H) / 2 * p1
    print("DeepSeek production prefill: K %.0f, input/output %.3f, hits %.4f, %d computed "
          "tokens a GPU a step" % (K, R, H, N))
    print("%-26s %8s %6s %6s %7s %7s %8s %8s" % ("mix", "requests", "alpha", "beta", "prompt",
                                                 "output", "position", "context"))
    print("%-26s %8s %6s %6s %7.0f %7.0f %8.0f %8.0f" % ("one length", "-", "-", "-", p1, o1,
                                                         pos1, round(pos1 - N / 2)))
    for name, label, read in traces:
        paths = [os.path.join(d, name) for d in dirs if os.path.exists(os.path.join(d, name))]
        if not paths:
            print("%-26s not found in %s" % (label, ", ".join(dirs)))
            continue
        s = shape(read(paths[0]))
        print("%-26s %8d %6.2f %6.2f %7.0f %7.0f %8.0f %8d" % (
            label, s["requests"], s["alpha"], s["beta"], s["mean_prompt"], s["mean_output"],
            s["pos"], s["context"]))
        if read is mooncake:
            hit, pos = mooncake_own_hits(paths[0], s["alpha"])
            print("%-26s %8s %6s %6s %7s %7s %8.0f %8d   (its own prefix hits, %.1f %% of "
                  "input tokens, in place of h)" % ("  the same, own hits", "", "", "", "", "",
                                                   pos, round(pos - N / 2), 100 * hit))


if __name__ == "__main__":
    main()
