#!/usr/bin/env python3
"""scripts/kernels-import.py -- turns AIConfigurator's silicon performance database into the
`kernels:` rows of models/hardware/{h100,h200,b200,gb200}.yaml.

Run once by hand, never at build or run time; python3 standard library only, plus the `zstd`
command for the parquet pages AIConfigurator compresses with zstd (snappy pages are decoded
here).

    git clone https://github.com/ai-dynamo/aiconfigurator /tmp/aic   # or a bare mirror
    scripts/kernels-import.py --git-dir /tmp/aic/.git [--commit SHA] [--dry-run]

What it takes (TensorRT-LLM 1.3.0rc20 tables of each system; models/README.md has the kinds):
  gemm_perf          -> gemm_bf16 (bfloat16), gemm_fp8 (fp8_block: DeepSeek's 1x128 / 128x128
                        block-scaled recipe), tflops = 2 m n k / latency, at the grid (n, k)
                        points that bracket the per-GPU projection shapes of the bundled models
  generation_attention_perf -> decode_gqa (bf16 and fp8 KV, head_dim 128, full attention),
                        us = latency, GBps = KV bytes read / latency; on h100 also the heads
                        per GPU of the vLLM training runs (TRAINING: validation/training/), bf16
                        KV, on a grid of their max_num_seqs and max_model_len; on every system
                        the heads per GPU of TensorRT-LLM's published FP8 points
                        (PUBLISHED_FP8_KV), fp8 KV, on that grid plus context 2,047
  generation_mla_perf       -> decode_mla (absorbed MLA decode of DeepSeek-V3's heads per GPU,
                        the KV element size of its model file), us = latency
  context_mla_perf          -> prefill_mla (DeepSeek-V3's heads per GPU, bf16), tflops =
                        causal pairs x 2 heads (qk + v head dims) / latency
  context_attention_perf    -> prefill_gqa (bf16, no cached prefix), tflops = causal FLOPs /
                        latency
  moe_perf           -> moe_bf16 (bfloat16) / moe_fp8 (fused MoE op: routing, token
                        permutation, grouped expert GEMMs, un-permutation; balanced routing),
                        tflops = expert FLOPs of the GPU / latency; moe_fp8 is each model's
                        FP8 checkpoint recipe (MODELS): fp8_block for DeepSeek-V3, per-tensor
                        fp8 for Qwen3-235B-A22B (nvidia/Qwen3-235B-A22B-FP8)
  custom_allreduce_perf -> allreduce (bf16), GBps = bus bandwidth 2 (n-1)/n bytes / latency
Rows of a series whose figure falls where physics says it must not (GEMM tflops as m grows,
attention time as batch or context grows) are measurement noise; they are left out and
counted on stderr, so every written file passes `kvfleet hw check`.

The rows go between the `# BEGIN kernels-import` and `# END kernels-import` lines of the
file's `kernels:` list (appended at its end the first time). Rows outside those lines are
kept by hand; a (kind, series) they already cover is not imported again.
"""
import argparse
import os
import re
import struct
import subprocess
import sys


# ---- a parquet reader (flat files as pyarrow writes them) ----------------------------------

class Thrift:
    """Thrift compact protocol, just enough for parquet's footer and page headers."""

    def __init__(self, buf, pos=0):
        self.b, self.p = buf, pos

    def varint(self):
        r = s = 0
        while True:
            c = self.b[self.p]
            self.p += 1
            r |= (c & 0x7F) << s
            s += 7
            if not c & 0x80:
                return r

    def zz(self):
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def value(self, t):
        if t in (1, 2):
            return t == 1
        if t == 3:
            v = self.b[self.p]
            self.p += 1
            return v - 256 if v > 127 else v
        if t in (4, 5, 6):
            return self.zz()
        if t == 7:
            v = struct.unpack_from("<d", self.b, self.p)[0]
            self.p += 8
            return v
        if t == 8:
            n = self.varint()
            v = bytes(self.b[self.p:self.p + n])
            self.p += n
            return v
        if t in (9, 10):
            h = self.b[self.p]
            self.p += 1
            n, et = h >> 4, h & 15
            if n == 15:
                n = self.varint()
            out = []
            for _ in range(n):
                if et in (1, 2):
                    out.append(self.b[self.p] == 1)
                    self.p += 1
                else:
                    out.append(self.value(et))
            return out
        if t == 11:
            n = self.varint()
            if not n:
                return {}
            h = self.b[self.p]
            self.p += 1
            return {self.value(h >> 4): self.value(h & 15) for _ in range(n)}
        if t == 12:
            return self.struct()
        raise ValueError("thrift type %d" % t)

    def struct(self):
        out, fid = {}, 0
        while True:
            h = self.b[self.p]
            self.p += 1
            if h == 0:
                return out
            d, t = h >> 4, h & 15
            fid = fid + d if d else self.zz()
            out[fid] = self.value(t)


def unzstd(data):
    return subprocess.run(["zstd", "-d", "-c", "-q"], input=data, stdout=subprocess.PIPE,
                          check=True).stdout


def unsnappy(b):
    t = Thrift(b, 0)
    n = t.varint()
    out = bytearray()
    p = t.p
    while p < len(b):
        tag = b[p]
        p += 1
        kind = tag & 3
        if kind == 0:
            ln = tag >> 2
            if ln >= 60:
                nb = ln - 59
                ln = int.from_bytes(b[p:p + nb], "little")
                p += nb
            ln += 1
            out += b[p:p + ln]
            p += ln
            continue
        if kind == 1:
            ln = ((tag >> 2) & 7) + 4
            off = ((tag >> 5) << 8) | b[p]
            p += 1
        elif kind == 2:
            ln = (tag >> 2) + 1
            off = int.from_bytes(b[p:p + 2], "little")
            p += 2
        else:
            ln = (tag >> 2) + 1
            off = int.from_bytes(b[p:p + 4], "little")
            p += 4
        for _ in range(ln):
            out.append(out[-off])
    if len(out) != n:
        raise ValueError("snappy: %d bytes, expected %d" % (len(out), n))
    return bytes(out)


def decompress(codec, data):
    if codec == 0:
        return data
    if codec == 1:
        return unsnappy(data)
    if codec == 6:
        return unzstd(data)
    raise ValueError("parquet codec %d" % codec)


def rle_hybrid(buf, pos, end, width, count):
    out = []
    nb = (width + 7) // 8
    t = Thrift(buf, pos)
    while len(out) < count and t.p < end:
        h = t.varint()
        if h & 1:
            groups = h >> 1
            nbytes = groups * width
            bits = int.from_bytes(buf[t.p:t.p + nbytes], "little")
            t.p += nbytes
            mask = (1 << width) - 1
            for i in range(groups * 8):
                out.append((bits >> (i * width)) & mask if width else 0)
        else:
            run = h >> 1
            v = int.from_bytes(buf[t.p:t.p + nb], "little")
            t.p += nb
            out.extend([v] * run)
    return out[:count]


def plain(buf, pos, ptype, count):
    if ptype == 1:
        return list(struct.unpack_from("<%di" % count, buf, pos))
    if ptype == 2:
        return list(struct.unpack_from("<%dq" % count, buf, pos))
    if ptype == 4:
        return list(struct.unpack_from("<%df" % count, buf, pos))
    if ptype == 5:
        return list(struct.unpack_from("<%dd" % count, buf, pos))
    if ptype == 6:
        out = []
        for _ in range(count):
            n = struct.unpack_from("<I", buf, pos)[0]
            out.append(bytes(buf[pos + 4:pos + 4 + n]).decode())
            pos += 4 + n
        return out
    if ptype == 0:
        bits = int.from_bytes(buf[pos:pos + (count + 7) // 8], "little")
        return [bool((bits >> i) & 1) for i in range(count)]
    raise ValueError("parquet physical type %d" % ptype)


def read_parquet(b):
    """Returns {column: [values]} of a flat parquet file (PLAIN / dictionary pages, zstd or
    uncompressed, data pages v1 and v2, optional columns: None for nulls)."""
    if b[:4] != b"PAR1" or b[-4:] != b"PAR1":
        raise ValueError("not a parquet file")
    n = struct.unpack_from("<I", b, len(b) - 8)[0]
    md = Thrift(b, len(b) - 8 - n).struct()
    schema = md[2][1:]
    cols = {s[4].decode(): [] for s in schema}
    optional = {s[4].decode(): s.get(3, 0) == 1 for s in schema}
    for rg in md[4]:
        for cc in rg[1]:
            cm = cc[3]
            name = b".".join(cm[3]).decode()
            ptype, codec, total = cm[1], cm[4], cm[5]
            pos = cm.get(11, cm[9]) if cm.get(11) else cm[9]
            dic, got = None, 0
            while got < total:
                t = Thrift(b, pos)
                ph = t.struct()
                body = b[t.p:t.p + ph[3]]
                pos = t.p + ph[3]
                ptyp = ph[1]
                if ptyp == 2:
                    raw = decompress(codec, body)
                    dic = plain(raw, 0, ptype, ph[7][1])
                    continue
                if ptyp == 0:
                    raw = decompress(codec, body)
                    nv, enc, p = ph[5][1], ph[5][2], 0
                    defs = None
                    if optional[name]:
                        ln = struct.unpack_from("<I", raw, 0)[0]
                        defs = rle_hybrid(raw, 4, 4 + ln, 1, nv)
                        p = 4 + ln
                elif ptyp == 3:
                    h2 = ph[8]
                    nv, enc = h2[1], h2[4]
                    dl, rl = h2.get(5, 0), h2.get(6, 0)
                    lev = body[:rl + dl]
                    rest = body[rl + dl:]
                    raw = decompress(codec, rest) if h2.get(7, True) else rest
                    defs = rle_hybrid(lev, rl, rl + dl, 1, nv) if optional[name] and dl else None
                    p = 0
                else:
                    continue
                present = sum(defs) if defs is not None else nv
                if present == 0:
                    vals = []
                elif enc in (2, 8):
                    width = raw[p]
                    vals = [dic[i] for i in rle_hybrid(raw, p + 1, len(raw), width, present)]
                elif enc == 0:
                    vals = plain(raw, p, ptype, present)
                else:
                    raise ValueError("parquet encoding %d in column %s" % (enc, name))
                if defs is not None:
                    it = iter(vals)
                    vals = [next(it) if d else None for d in defs]
                cols[name].extend(vals)
                got += nv
    return cols


# ---- the selection ---------------------------------------------------------------------

REPO = "ai-dynamo/aiconfigurator"
DATA = "aic-core/src/aiconfigurator_core/systems/data"
SYSTEMS = {"h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "gb200": "gb200"}
FRAMEWORK, VERSION = "trtllm", "1.3.0rc20"
BACKEND = "TensorRT-LLM " + VERSION
GEMM_DTYPES = {"gemm_bf16": "bfloat16", "gemm_fp8": "fp8_block"}
GEMM_M = (1, 16, 128, 1024, 16384)
DECODE_BATCH = (1, 8, 64, 512)
DECODE_STEP = (15, 255, 2047, 16383, 131071)
PREFILL_BATCH = (1, 8)
PREFILL_ISL = (256, 1024, 4096, 16384)
MOE_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384)
ALLREDUCE_ELEMS = (4096, 65536, 524288, 4194304, 33554432, 268435456)

# Models whose shapes are imported: the GEMM kinds with the tensor-parallel degrees of their dense
# layers (bf16 as released; block-FP8 for FP8 runs of the bf16 models, `precision.weights: fp8`),
# the tensor-parallel degrees of their attention, and their fused-MoE series: (kind, the
# database's moe_dtype, what that recipe is, the (moe_tp, moe_ep) layouts). Mixtral has no model
# file: its figures are those of mistralai/Mixtral-8x7B-v0.1 config.json.
#
# Qwen3-235B-A22B's moe_fp8 rows are moe_dtype `fp8`, per-tensor scaled FP8 weights and
# activations: the recipe of nvidia/Qwen3-235B-A22B-FP8, the checkpoint TensorRT-LLM's
# published tables run, a TensorRT Model Optimizer FP8 export (NVIDIA's carry hf_quant_config
# quant_algo FP8, e.g. nvidia/Llama-3.1-70B-Instruct-FP8's in AIConfigurator's model_configs;
# that directory has no file of this one), which AIConfigurator prices as MoEQuantMode.fp8
# (sdk/models/helpers.py). Qwen's own Qwen/Qwen3-235B-A22B-FP8 is 128x128 block-scaled
# (fp8_block), DeepSeek-V3's recipe. Its FP8 dense GEMMs stay gemm_fp8 = fp8_block (the kind's
# one recipe), at TP1 for attention data parallelism (DEP8) as at TP8. Llama-3.1-70B's block-FP8
# GEMMs are also at TP2, the layout of TensorRT-LLM's published Llama-3.3-70B FP8 points
# (scenarios/published/trtllm-h{100,200}-llama70b-offline.yaml): qkv 5,120 x 8,192 (a grid
# point), FFN gate+up 28,672 x 8,192 and down 8,192 x 14,336 (between grid points: the database
# measures n 16,384 and 51,200, k 12,288 and 16,384, not these).
MODELS = [
    ("llama-3.1-8b", {"gemm_bf16": (1,), "gemm_fp8": (1,)}, (1,), ()),
    ("llama-3.1-70b", {"gemm_bf16": (8,), "gemm_fp8": (2, 8)}, (8,), ()),
    ("qwen3-235b-a22b", {"gemm_bf16": (8,), "gemm_fp8": (1, 8)}, (8,),
     (("moe_bf16", "bfloat16", "", ((1, 4), (1, 8), (8, 1))),
      ("moe_fp8", "fp8", " per-tensor (ModelOpt FP8)", ((1, 4), (1, 8), (8, 1))))),
    ("mixtral-8x7b", {"gemm_bf16": (1,), "gemm_fp8": (1,)}, (1,),
     (("moe_bf16", "bfloat16", "", ((2, 1), (8, 1))),)),
    ("deepseek-v3", {"gemm_fp8": (1,)}, (1,),
     (("moe_fp8", "fp8_block", "", ((1, 8), (1, 16), (1, 32), (1, 64), (1, 128), (1, 256))),)),
]
# The models and tensor-parallel degrees of validation/training/manifest.csv (vLLM on H100 SXM,
# bf16/fp16 KV, max_num_seqs 128, max_model_len 4096): their decode_gqa series only, on h100
# only, bf16 KV, at batches 1-128 and contexts 15-4,095 (on DECODE_BATCH x DECODE_STEP their
# batch 512, never reached, has no row past 255 tokens, so a step of 110 sequences at 800
# tokens would be the roofline's). Some small-batch series stop early or skip a point: the
# kernel's time falls as the context grows where its multi-block split switches on.
# Heads per GPU: Llama-2-7B TP1 32/32, Llama-2-70B TP4 16/2, Mixtral-8x7B TP2 16/4,
# CodeLlama-34B TP2 32/4. The grid is what fitted the loader's 512 rows per file then
# (MDL_KROWS_MAX, now 1,024; h100 had 432): against every (batch 4-128, context 255-2,047)
# point of the database its log-log lookup is off by 2.9 % of the summed time (at most 41 %,
# at batch 4, where the kernel's multi-block switch makes time fall with context). A (heads,
# kv_heads, head_dim) the MODELS already import keeps its coarse series.
TRAINING = (("llama-2-7b", (1,)), ("llama-2-70b", (4,)), ("mixtral-8x7b", (2,)),
            ("codellama-34b", (2,)))
TRAINING_SYSTEMS = ("h100_sxm",)
TRAINING_BATCH = (1, 8, 32, 64, 128)
TRAINING_STEP = (15, 255, 1023, 4095)
# The attention layouts of TensorRT-LLM's published FP8 points (scenarios/published/trtllm-*,
# `precision: {kv: fp8}`): Llama-3.3-70B TP2 (models/llama-3.1-70b.yaml) 32/4 heads per GPU,
# Qwen3-235B-A22B DEP8 (attention TP1) 64/4; their decode_gqa series only, fp8 KV, on every
# system, on the training grid plus context 2,047 (on DECODE_BATCH x DECODE_STEP their batch
# 512 has no row past 255 tokens; at 64/4 the database's batch 128 stops at 2,047 tokens, so
# on TRAINING_STEP alone that series would end at 1,023 and Qwen3's 126 sequences per GPU at
# 1,000-2,000 tokens would be the roofline's). The database measures batch 256 only to 1,023
# tokens and 512 to 511, so Llama's 216 (H100) and 502 (H200) sequences per TP group at those
# contexts lie outside every grid and stay on the roofline.
PUBLISHED_FP8_KV = (("llama-3.1-70b", (2,)), ("qwen3-235b-a22b", (1,)))
# The fused-MoE series are imported twice: with tokens spread evenly over the experts
# (distribution `balanced`) and with the power law AIConfigurator itself prices TensorRT-LLM's
# MoE layers under by default (sdk/config.py workload_distribution "power_law", its alpha the
# model family's: 1.2 for generic MoE models, sdk/models/moe.py, which Qwen3 and Mixtral are;
# 1.01 for DeepSeek's, sdk/models/deepseek.py). The power-law rows carry `routing: power_law`;
# a scenario reads them with moe.routing: power_law.
MOE_POWER_LAW = {"experts": {128: "1.2", 8: "1.2", 256: "1.01"}}
# DeepEP's low-latency (decode) all-to-alls by tokens per call: AIConfigurator's SGLang
# wide-EP table (framework sglang, collected with SGLang 0.5.0's DeepEP, filed under
# 0.5.6.post2) measured on H100 SXM at DeepSeek-V3's shape (hidden 7,168, top-8, 256 experts)
# on 2, 4 and 8 nodes of 8 GPUs (EP16, EP32, EP64: across nodes, RDMA-bound as in DeepEP's own
# table). One node (EP8) is left out: there DeepEP reaches peers over NVLink, a different
# transport from the pure-RDMA EP8 point of DeepEP's table the files carry. The h200_sxm copy
# of this table holds the same figures, so h100, h200 and h800 (H100's SMs and 400 Gb/s NIC;
# these kernels use the NIC) all take the H100 rows. GBps in DeepEP's own convention: dispatch
# bytes = tokens x top-k x (hidden + hidden/128 x 4) (FP8 with a float scale per 128), combine
# = tokens x top-k x hidden x 2 (bf16). A (mode, ep, tokens) point the file's hand rows
# measure (DeepEP's table at 128 tokens) is not imported again.
DEEPEP = {"system": "h100_sxm", "framework": "sglang", "version": "0.5.6.post2",
          "hidden": 7168, "topk": 8, "experts": 256, "nodes": (2, 4, 8), "gpus_per_node": 8}
DEEPEP_INTO = ("h100", "h200", "h800")
# The MoE work between DeepEP's normal (prefill) dispatch and combine, as SGLang runs it
# (DeepEPMoE.run_moe_core: tokens permuted into DeepGEMM's contiguous per-expert layout, the
# block-FP8 grouped gate+up GEMM, SiLU-and-multiply with FP8 quantisation, the grouped down
# GEMM, un-permutation weighted by the router): AIConfigurator's SGLang wide-EP table
# `wideep_context_moe_perf` (SGLang 0.5.10, H100 SXM, DeepSeek-V3's expert shape), one GPU
# holding its EP rank's experts. num_tokens counts the EP group's tokens (a GPU's x ep), the
# fused rows' convention. They become moe_fp8 rows with `mode: normal`, read before the fused
# rows in a prefill step under expert parallelism. h800 (H100's SMs and HBM) takes them as
# h100 does; gb200 takes GB200's own (the same table and version measured on one GB200; no
# EP8 there: an EP8 step interpolates between EP4 and EP16 at its tokens a GPU); h200 does
# not: its published point runs TensorRT-LLM's own EP path, not DeepEP.
# The same table's decode twin, `wideep_generation_moe_perf` (the op between DeepEP's
# low-latency dispatch and combine: DeepGEMM's masked grouped GEMMs and the activation between
# them, up to 128 tokens a GPU), becomes rows with `mode: low_latency`, from EP16 up (decode
# EP sizes; the loader holds 1,024 rows a file).
WIDEEP_MOE = {"framework": "sglang", "version": "0.5.10", "model": "deepseek-v3",
              "phases": (("wideep_context_moe_perf", "normal", (4, 8, 16, 32, 64, 128, 256)),
                         ("wideep_generation_moe_perf", "low_latency", (16, 32, 64, 128, 256)))}
WIDEEP_MOE_INTO = {"h100": "h100_sxm", "h800": "h100_sxm", "gb200": "gb200"}
# H800 SXM5 is H100 SXM5 with NVLink cut to 400 GB/s: the same SMs, clocks and HBM3. h800's
# hand rows (DeepSeek's own kernels measured on H800) have no MLA prefill attention, which runs
# on one GPU without NVLink: it takes h100_sxm's (context_mla_perf), so a DeepSeek prefill step
# on H800 is priced by measured attention, not the roofline.
PREFILL_MLA_FROM = {"h800": "h100_sxm"}
PUBLISHED_STEP = (15, 255, 1023, 2047, 4095)
MIXTRAL = {"hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128, "ffn": 0,
           "experts": 8, "experts_active": 2, "expert_ffn": 14336, "layers": 32,
           "attention": "gqa"}


def read_model(root, name):
    path = os.path.join(root, "models", name + ".yaml")
    if not os.path.exists(path):
        if name == "mixtral-8x7b":
            return dict(MIXTRAL)
        sys.exit("%s: no such model file" % path)
    out = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^(\w+):\s*([^#\s]+)", line)
            if m:
                v = m.group(2)
                try:
                    out[m.group(1)] = int(v)
                except ValueError:
                    out[m.group(1)] = v
    out.setdefault("kv_heads", out["heads"])
    out.setdefault("head_dim", out["hidden"] // out["heads"])
    return out


def gemm_shapes(md, tp):
    """Per-GPU (n, k) of the model's GEMMs outside the routed experts under tensor parallelism
    tp: column-parallel projections split n, row-parallel ones k (Megatron layout)."""
    h, H, hd = md["hidden"], md["heads"], md["head_dim"]
    sh = []
    if md.get("attention", "gqa") == "gqa":
        kv = max(md["kv_heads"] // tp, 1)
        sh += [((H // tp + 2 * kv) * hd, h), (h, H * hd // tp)]
    else:
        r, q, c = md.get("rope_dim", 0), md.get("q_lora_rank", 0), md.get("kv_lora_rank", 0)
        sh += [(q + c + r, h), (H * (hd + r) // tp, q), (H * 2 * hd // tp, c), (h, H * hd // tp)]
    if md.get("ffn") and (md.get("experts", 0) == 0 or md.get("dense_layers", 0) > 0):
        sh += [(2 * md["ffn"] // tp, h), (h, md["ffn"] // tp)]
    if md.get("shared_experts"):
        f = md["expert_ffn"] * md["shared_experts"]
        sh += [(2 * f, h), (h, f)]
    return sh


def bracket(grid, x):
    lo = [g for g in grid if g <= x]
    hi = [g for g in grid if g >= x]
    if not lo or not hi:
        return []
    return sorted({max(lo), min(hi)})


# ---- reading the database ----------------------------------------------------------------

class Source:
    def __init__(self, git_dir, commit):
        self.git_dir, self.commit = git_dir, commit

    def table(self, system, group, name, framework=None, version=None):
        path = "%s/%s/%s/%s/%s/%s.parquet" % (DATA, system, group, framework or FRAMEWORK,
                                               version or VERSION, name)
        blob = subprocess.run(["git", "--git-dir", self.git_dir, "show", self.commit + ":" + path],
                              stdout=subprocess.PIPE, check=True).stdout
        cols = read_parquet(blob)
        keys = list(cols)
        rows = [dict(zip(keys, r)) for r in zip(*[cols[k] for k in keys])]
        return path, rows

    def cite(self, path, system, what, backend=None):
        return "%s %s @ %s, %s, %s, %s" % (REPO, path[len(DATA) + 1:], self.commit[:12], system,
                                         backend or BACKEND, what)


def fmt(x):
    if isinstance(x, str):
        return x
    if isinstance(x, int) or float(x).is_integer():
        return "%d" % x
    return "%.4g" % x


def row(kind, cols, source):
    body = ", ".join("%s: %s" % (k, fmt(v)) for k, v in cols)
    return '  - {kind: %s, %s, source: "%s"}' % (kind, body, source)


def monotone(points):
    """Keeps the points (x, y, payload) of one series, in x order, whose y does not fall below
    a kept point at a smaller x: returns kept, dropped count."""
    kept, best, dropped = [], None, 0
    for p in sorted(points, key=lambda p: p[0]):
        if best is None or p[1] >= best:
            kept.append(p)
            best = p[1]
        else:
            dropped += 1
    return kept, dropped


def monotone2(points):
    """Points (x1, x2, y, payload) of a 2-D series whose y (a time) must not fall as x1 or x2
    grows: keeps, in (x1, x2) order, each point not below a kept point smaller along one axis
    and equal along the other. Returns kept, dropped count."""
    kept, dropped = [], 0
    for p in sorted(points, key=lambda p: (p[0], p[1])):
        if any(q[2] > p[2] and ((q[0] == p[0] and q[1] < p[1]) or (q[1] == p[1] and q[0] < p[0]))
               for q in kept):
            dropped += 1
        else:
            kept.append(p)
    return kept, dropped


# ---- each table -----------------------------------------------------------------------

def gemm_rows(src, system, models, hand, stats):
    path, rows = src.table(system, "gemm", "gemm_perf")
    out = []
    for kind, dtype in GEMM_DTYPES.items():
        sel = [r for r in rows if r["gemm_dtype"] == dtype]
        ns, ks = sorted({r["n"] for r in sel}), sorted({r["k"] for r in sel})
        have = {(r["n"], r["k"], r["m"]): r["latency"] for r in sel}
        series = set()
        for md, gk, _, _ in models:
            for tp in gk.get(kind, ()):
                for n, k in gemm_shapes(md, tp):
                    if (kind, n, k) in hand:
                        continue
                    for gn in bracket(ns, n):
                        for gkk in bracket(ks, k):
                            if (kind, gn, gkk) not in hand:
                                series.add((gn, gkk))
        cite = src.cite(path, system, dtype)
        for n, k in sorted(series):
            pts = []
            for m in GEMM_M:
                lat = have.get((n, k, m))
                if lat:
                    pts.append((m, 2.0 * m * n * k / (lat * 1e-3) / 1e12, lat))
            kept, d = monotone(pts)
            stats["dropped"] += d
            for m, tf, lat in kept:
                out.append(row(kind, [("m", m), ("n", n), ("k", k), ("tflops", round(tf, 2)),
                                      ("us", round(lat * 1e3, 3))], cite))
    return out


def gqa_configs(models):
    cfg = set()
    for md, _, tps, _ in models:
        if md.get("attention", "gqa") != "gqa":
            continue
        for tp in tps:
            cfg.add((md["heads"] // tp, max(md["kv_heads"] // tp, 1), md["head_dim"]))
    return sorted(cfg)


def decode_rows(src, system, models, training, published, hand, stats):
    """decode_gqa rows: the MODELS' series on the coarse grid (bf16 and fp8 KV), then, on
    TRAINING_SYSTEMS, the training models' other series on the fine grid (bf16 KV), then the
    published FP8 points' other series on that grid plus context 2,047 (fp8 KV)."""
    if "decode_gqa" in hand:
        return []
    path, rows = src.table(system, "attention", "generation_attention_perf")
    coarse = gqa_configs(models)
    fine = [c for c in gqa_configs(training) if c not in coarse]
    plan = [(2, "bfloat16", coarse, DECODE_BATCH, DECODE_STEP),
            (1, "fp8", coarse, DECODE_BATCH, DECODE_STEP)]
    if system in TRAINING_SYSTEMS:
        plan.append((2, "bfloat16", fine, TRAINING_BATCH, TRAINING_STEP))
    plan.append((1, "fp8", [c for c in gqa_configs(published) if c not in coarse],
                 TRAINING_BATCH, PUBLISHED_STEP))
    out = []
    for kvb, dt, configs, batches, steps in plan:
        have = {}
        for r in rows:
            if r["window_size"] == 0 and r["kv_cache_dtype"] == dt and r["isl"] == 1:
                have[(r["num_heads"], r["num_key_value_heads"], r["head_dim"], r["batch_size"],
                      r["step"])] = r["latency"]
        cite = src.cite(path, system, "%s KV" % ("bf16" if kvb == 2 else "fp8"))
        for h, kv, hd in configs:
            pts = [(b, s, have[(h, kv, hd, b, s)], None) for b in batches
                   for s in steps if (h, kv, hd, b, s) in have]
            # time never falls as the batch or the context grows
            kept, d = monotone2(pts)
            stats["dropped"] += d
            for b, s, lat, _ in kept:
                nb = 2.0 * b * kv * hd * kvb * (s + 1)
                out.append(row("decode_gqa", [("heads", h), ("kv_heads", kv), ("head_dim", hd),
                                              ("kv_bytes", kvb), ("batch", b), ("context", s),
                                              ("us", round(lat * 1e3, 3)),
                                              ("GBps", round(nb / (lat * 1e-3) / 1e9, 1))],
                               cite))
    return out


def mla_rows(src, system, models, hand, stats):
    if "decode_mla" in hand:
        return []
    path, rows = src.table(system, "mla", "generation_mla_perf")
    dt = {2: "bfloat16", 1: "fp8"}
    out = []
    for md, _, tps, _ in models:
        if md.get("attention") != "mla":
            continue
        kvb = md.get("kv_bytes_per_elem", 2)
        have = {(r["num_heads"], r["batch_size"], r["step"]): r["latency"] for r in rows
                if r["kv_cache_dtype"] == dt[kvb] and r["isl"] == 1}
        cite = src.cite(path, system, "%s latent KV" % ("bf16" if kvb == 2 else "fp8"))
        for tp in tps:
            h = md["heads"] // tp
            pts = [(b, s, have[(h, b, s)], None) for b in DECODE_BATCH for s in DECODE_STEP
                   if (h, b, s) in have]
            kept, d = monotone2(pts)
            stats["dropped"] += d
            for b, s, lat, _ in kept:
                out.append(row("decode_mla", [("heads", h), ("kv_bytes", kvb), ("batch", b),
                                              ("context", s), ("us", round(lat * 1e3, 3))], cite))
    return out


def mla_prefill_rows(src, system, models, hand, stats):
    if "prefill_mla" in hand:
        return []
    path, rows = src.table(system, "mla", "context_mla_perf")
    out = []
    cite = src.cite(path, system, "bf16, causal")
    for md, _, tps, _ in models:
        if md.get("attention") != "mla":
            continue
        have = {(r["num_heads"], r["batch_size"], r["isl"]): r["latency"] for r in rows
                if r["mla_dtype"] == "bfloat16" and r["kv_cache_dtype"] == "bfloat16" and
                r["step"] == 0}
        qk_v = 2 * md["head_dim"] + md.get("rope_dim", 0)  # nope + rope (qk) + v head dims
        for tp in tps:
            h = md["heads"] // tp
            pts = [(b, s, have[(h, b, s)], None) for b in PREFILL_BATCH for s in PREFILL_ISL
                   if (h, b, s) in have]
            kept, d = monotone2(pts)
            stats["dropped"] += d
            for b, s, lat, _ in kept:
                tf = b * s * (s + 1) / 2 * 2.0 * h * qk_v / (lat * 1e-3) / 1e12
                out.append(row("prefill_mla", [("heads", h), ("batch", b), ("seqlen", s),
                                               ("tflops", round(tf, 2)),
                                               ("us", round(lat * 1e3, 3))], cite))
    return out


def prefill_rows(src, system, models, hand, stats):
    if "prefill_gqa" in hand:
        return []
    path, rows = src.table(system, "attention", "context_attention_perf")
    have = {}
    for r in rows:
        if (r["window_size"] == 0 and r["attn_dtype"] == "bfloat16" and
                r["kv_cache_dtype"] == "bfloat16" and r["step"] == 0):
            have[(r["num_heads"], r["num_key_value_heads"], r["head_dim"], r["batch_size"],
                  r["isl"])] = r["latency"]
    out, cite = [], src.cite(path, system, "bf16, causal")
    for h, kv, hd in gqa_configs(models):
        pts = [(b, s, have[(h, kv, hd, b, s)], None) for b in PREFILL_BATCH for s in PREFILL_ISL
               if (h, kv, hd, b, s) in have]
        kept, d = monotone2(pts)
        stats["dropped"] += d
        for b, s, lat, _ in kept:
            # QK^T and PV over the causal half: 4 hd FLOPs per (query, key) pair
            tf = 4.0 * b * h * hd * s * (s + 1) / 2 / (lat * 1e-3) / 1e12
            out.append(row("prefill_gqa", [("heads", h), ("kv_heads", kv), ("head_dim", hd),
                                           ("batch", b), ("seqlen", s),
                                           ("tflops", round(tf, 2)),
                                           ("us", round(lat * 1e3, 3))], cite))
    return out


def moe_rows(src, system, models, hand, stats):
    path, rows = src.table(system, "moe", "moe_perf")
    out = []
    for md, _, _, series in models:
        for kind, dtype, recipe, layouts in series:
            if kind in hand:
                continue
            E, k, h, f = md["experts"], md["experts_active"], md["hidden"], md["expert_ffn"]
            alpha = MOE_POWER_LAW["experts"][E]
            for dist, routing in (("balanced", None), ("power_law_" + alpha, "power_law")):
                have = {}
                for r in rows:
                    if (r["moe_dtype"] == dtype and r["distribution"] == dist and
                            r["hidden_size"] == h and r["inter_size"] == f and
                            r["num_experts"] == E and r["topk"] == k):
                        have.setdefault((r["moe_tp_size"], r["moe_ep_size"], r["num_tokens"]),
                                        (r["latency"], r["kernel_source"]))
                for tp, ep in layouts:
                    pts = []
                    for t in MOE_TOKENS:
                        got = have.get((tp, ep, t))
                        if got:
                            # each GPU computes its share of the t x k (token, expert) pairs:
                            # gate, up and down GEMMs, 2 FLOPs per multiply-add
                            fl = 2.0 * 3 * h * f / tp * t * k / ep
                            pts.append((t, fl / (got[0] * 1e-3) / 1e12, got))
                    kept, d = monotone(pts)
                    stats["dropped"] += d
                    for t, tf, (lat, ks) in kept:
                        cite = src.cite(path, system, "%s%s %s %s" % (dtype, recipe, ks, dist))
                        cols = [("experts", E), ("topk", k), ("hidden", h), ("inter", f),
                                ("tp", tp), ("ep", ep)]
                        if routing:
                            cols.append(("routing", routing))
                        cols += [("tokens", t), ("tflops", round(tf, 3)),
                                 ("us", round(lat * 1e3, 3))]
                        out.append(row(kind, cols, cite))
    return out


def allreduce_rows(src, system, hand, stats):
    if "allreduce" in hand:
        return []
    path, rows = src.table(system, "comm", "custom_allreduce_perf")
    out, cite = [], src.cite(path, system, "bf16 custom all-reduce")
    for g in sorted({r["num_gpus"] for r in rows}):
        pts = []
        for r in rows:
            if r["num_gpus"] == g and r["message_size"] in ALLREDUCE_ELEMS:
                b = 2.0 * r["message_size"]
                pts.append((b, b * 2 * (g - 1) / g / (r["latency"] * 1e-3) / 1e9, r["latency"]))
        kept, d = monotone(pts)
        stats["dropped"] += d
        for b, bw, lat in kept:
            out.append(row("allreduce", [("gpus", g), ("bytes", b), ("GBps", round(bw, 2)),
                                         ("us", round(lat * 1e3, 3))], cite))
    return out


def deepep_rows(src, hand_points, stats):
    d = DEEPEP
    path, rows = src.table(d["system"], "comm", "wideep_deepep_ll_perf", d["framework"],
                           d["version"])
    h, k = d["hidden"], d["topk"]
    out = []
    for kind, col, per_tok in (("ep_dispatch", "dispatch_avg_t_us", h + h / 128 * 4),
                               ("ep_combine", "combine_avg_t_us", h * 2.0)):
        for nodes in d["nodes"]:
            ep = nodes * d["gpus_per_node"]
            # a call's time (tokens / GBps) must not fall as the tokens grow: a point below the
            # slowest smaller call, measured or by hand, is noise, left out and counted
            pts = [(t, t / g, None) for (kd, e, t), g in hand_points.items() if (kd, e) == (kind, ep)]
            for r in rows:
                if (r["op_name"] == "ll" and r["node_num"] == nodes and r["hidden_size"] == h and
                        r["num_topk"] == k and r["num_experts"] == d["experts"] and
                        (kind, ep, r["num_token"]) not in hand_points):
                    t, us = r["num_token"], r[col]
                    g = round(t * k * per_tok / (us * 1e-6) / 1e9, 2)
                    pts.append((t, t / g, (g, us, r["version"])))
            kept, _ = monotone(pts)
            stats["dropped"] += sum(1 for p in pts if p[2] is not None) - \
                sum(1 for p in kept if p[2] is not None)
            for t, _, got in kept:
                if got is None:
                    continue
                g, us, version = got
                cite = src.cite(path, d["system"], "DeepEP low-latency, %d nodes x %d GPUs" %
                                (nodes, d["gpus_per_node"]), "SGLang %s" % version)
                out.append(row(kind, [("mode", "low_latency"), ("ep", ep), ("tokens", t),
                                      ("GBps", g), ("us", round(us, 3))], cite))
    return out


def wideep_moe_rows(src, system, root, stats):
    out = []
    for table, mode, eps in WIDEEP_MOE["phases"]:
        out += wideep_moe_phase(src, system, root, stats, table, mode, eps)
    return out


def wideep_moe_phase(src, system, root, stats, table, mode, eps):
    w = WIDEEP_MOE
    path, rows = src.table(system, "moe", table, w["framework"], w["version"])
    md = read_model(root, w["model"])
    E, k, h, f = md["experts"], md["experts_active"], md["hidden"], md["expert_ffn"]
    alpha = MOE_POWER_LAW["experts"][E]
    out = []
    for dist, routing in (("uniform", None), ("power_law_" + alpha, "power_law")):
        have = {}
        for r in rows:
            if (r["moe_dtype"] == "fp8_block" and r["distribution"] == dist and
                    r["hidden_size"] == h and r["inter_size"] == f and r["num_experts"] == E and
                    r["topk"] == k and r["moe_tp_size"] == 1):
                have.setdefault((r["moe_ep_size"], r["num_tokens"]), (r["latency"], r["kernel_source"]))
        for ep in eps:
            pts = []
            for (e, t), got in sorted(have.items()):
                if e == ep:
                    fl = 2.0 * 3 * h * f * t * k / ep   # the GPU's share of the expert FLOPs
                    pts.append((t, fl / (got[0] * 1e-3) / 1e12, got))
            kept, d = monotone(pts)
            stats["dropped"] += d
            for t, tf, (lat, ks) in kept:
                cite = src.cite(path, system, "fp8_block %s %s, after DeepEP %s dispatch"
                                % (ks, "balanced" if dist == "uniform" else dist,
                                   mode.replace("_", "-")),
                                "SGLang %s" % w["version"])
                cols = [("experts", E), ("topk", k), ("hidden", h), ("inter", f), ("tp", 1),
                        ("ep", ep), ("mode", mode)]
                if routing:
                    cols.append(("routing", routing))
                cols += [("tokens", t), ("tflops", round(tf, 3)), ("us", round(lat * 1e3, 3))]
                out.append(row("moe_fp8", cols, cite))
    return out


def ep_points(lines):
    """{(kind, ep, tokens): GBps} of the low-latency EP rows outside the imported block."""
    have, inside = {}, False
    for ln in lines:
        if ln.startswith(BEGIN):
            inside = True
        elif ln.startswith(END):
            inside = False
        elif not inside and re.search(r"kind:\s*ep_(dispatch|combine), mode:\s*low_latency", ln):
            kind = re.search(r"kind:\s*(\w+)", ln).group(1)
            ep = int(re.search(r"\bep:\s*(\d+)", ln).group(1))
            t = int(re.search(r"\btokens:\s*(\d+)", ln).group(1))
            have[(kind, ep, t)] = float(re.search(r"\bGBps:\s*([\d.e]+)", ln).group(1))
    return have


# ---- the hardware files ------------------------------------------------------------------

BEGIN = "  # BEGIN kernels-import (scripts/kernels-import.py; edits between these lines are lost)"
END = "  # END kernels-import"


def hand_series(lines):
    """Kinds and GEMM series already in the file outside the imported block."""
    have, inside = set(), False
    for ln in lines:
        if ln.startswith(BEGIN):
            inside = True
        elif ln.startswith(END):
            inside = False
        elif not inside and ln.lstrip().startswith("- {kind:"):
            kind = re.search(r"kind:\s*(\w+)", ln).group(1)
            have.add(kind)
            n, k = re.search(r"\bn:\s*([\d.e]+)", ln), re.search(r"\bk:\s*([\d.e]+)", ln)
            if n and k:
                have.add((kind, int(float(n.group(1))), int(float(k.group(1)))))
    # GEMM kinds stay importable for shapes the hand rows do not cover
    for kind in ("gemm_bf16", "gemm_fp8"):
        have.discard(kind)
    return have


def splice(lines, block, commit, what):
    head = [BEGIN, "  # %s @ %s, %s" % (REPO, commit, what)]
    if BEGIN in lines:
        a, b = lines.index(BEGIN), lines.index(END)
        return lines[:a] + head + block + lines[b:]
    if "kernels:" not in lines:
        lines = lines + ["kernels:"]
    return lines + head + block + [END]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--git-dir", required=True, help="a clone or mirror of " + REPO)
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--dry-run", action="store_true", help="print the rows, write nothing")
    a = ap.parse_args()
    commit = subprocess.run(["git", "--git-dir", a.git_dir, "rev-parse", a.commit],
                            stdout=subprocess.PIPE, check=True, text=True).stdout.strip()
    src = Source(a.git_dir, commit)
    models = [(read_model(a.root, n), g, tps, moe) for n, g, tps, moe in MODELS]
    training = [(read_model(a.root, n), {}, tps, ()) for n, tps in TRAINING]
    published = [(read_model(a.root, n), {}, tps, ()) for n, tps in PUBLISHED_FP8_KV]
    extra = [s for s in list(DEEPEP_INTO) + list(PREFILL_MLA_FROM) if s not in SYSTEMS]
    for ours in list(SYSTEMS) + sorted(set(extra), key=extra.index):
        theirs = SYSTEMS.get(ours)
        path = os.path.join(a.root, "models", "hardware", ours + ".yaml")
        with open(path) as f:
            lines = f.read().rstrip("\n").split("\n")
        hand = hand_series(lines)
        stats = {"dropped": 0}
        block = []
        if theirs:
            block = (gemm_rows(src, theirs, models, hand, stats) +
                     decode_rows(src, theirs, models, training, published, hand, stats) +
                     mla_rows(src, theirs, models, hand, stats) +
                     prefill_rows(src, theirs, models, hand, stats) +
                     mla_prefill_rows(src, theirs, models, hand, stats) +
                     moe_rows(src, theirs, models, hand, stats) +
                     allreduce_rows(src, theirs, hand, stats))
        if ours in PREFILL_MLA_FROM:
            block += mla_prefill_rows(src, PREFILL_MLA_FROM[ours], models, hand, stats)
        if ours in DEEPEP_INTO:
            block += deepep_rows(src, ep_points(lines), stats)
        if ours in WIDEEP_MOE_INTO:
            block += wideep_moe_rows(src, WIDEEP_MOE_INTO[ours], a.root, stats)
        print("%s: %d rows from %s (%d left out: a series falling against physics)" %
              (path, len(block), theirs or DEEPEP["system"], stats["dropped"]), file=sys.stderr)
        if a.dry_run:
            print("\n".join(block))
            continue
        with open(path, "w") as f:
            what = " and ".join(([BACKEND + " tables"] if theirs else []) +
                                (["H100 SXM's prefill_mla (%s)" % BACKEND]
                                 if ours in PREFILL_MLA_FROM else []) +
                                (["SGLang's DeepEP low-latency table (H100 SXM)"]
                                 if ours in DEEPEP_INTO else []) +
                                (["SGLang's wide-EP MoE table (%s)" % WIDEEP_MOE_INTO[ours]]
                                 if ours in WIDEEP_MOE_INTO else []))
            f.write("\n".join(splice(lines, block, commit, what)) + "\n")


if __name__ == "__main__":
    main()
