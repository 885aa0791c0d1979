#!/usr/bin/env python3
"""Make a synthetic target/draft Llama pair that share one SentencePiece vocabulary.

Everything happens on the machine that runs this script (no downloads):

  corpus     .py files of the running interpreter's site-packages and stdlib
             (dedupe by content hash, 200 B - 300 kB each, shuffled with the seed,
             capped at --max-chars characters)
  tokenizer  SentencePiece BPE, vocab 8192, byte fallback, identity normalization,
             no whitespace collapsing, whitespace-only pieces, split digits,
             unk/bos/eos = 0/1/2, no dummy prefix; trained on a line sample
  models     draft: Llama 2 layers, hidden 1024, 16x64 heads, 8 KV heads, FFN 2816
             target core: Llama 4 layers, hidden 2560, 32x128 heads, 8 KV heads, FFN 9728
             untied embeddings/head, RoPE theta 10000, RMSNorm eps 1e-5;
             both trained in one process on the same batches for a fixed wall time
  padding    the target gets identity layers appended (o_proj, down_proj exactly 0)
             up to --target-layers; checked in fp32 against the core
  output     DIR/target-hf, DIR/draft-hf: Hugging Face LlamaForCausalLM folders
             (config.json, f16 safetensors, tokenizer.model, tokenizer_config.json,
             special_tokens_map.json) that llama.cpp's convert_hf_to_gguf.py converts;
             DIR/pair.json: every setting, counts, losses, accuracies and timings.

The model code is plain PyTorch; transformers is only imported (if present) to check
that the written folders load as LlamaForCausalLM and give the same logits.

Usage:
  PYTHONUNBUFFERED=1 python3 scripts/make_pair.py --out DIR [--seed N]
      [--train-seconds S] [--max-chars N] [--tiny]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing as mp
import os
import platform
import random
import site
import socket
import struct
import sys
import sysconfig
import time

import numpy as np

T_START = time.time()


def log(msg: str) -> None:
    print(f"[make_pair {time.time() - T_START:7.1f}s] {msg}", flush=True)


# ----------------------------------------------------------------------------
# settings
# ----------------------------------------------------------------------------

FULL = dict(
    draft=dict(n_layers=2, hidden=1024, n_heads=16, head_dim=64, n_kv_heads=8, ffn=2816),
    target=dict(n_layers=4, hidden=2560, n_heads=32, head_dim=128, n_kv_heads=8, ffn=9728),
    target_layers=36,
    batch=48, seq=512,
    max_chars=150_000_000,
    sp_sample_bytes=20_000_000,
    train_seconds=300.0,
    eval_batches=16, eval_batch=16,
    log_every=50,
)

# tiny: same shapes in kind (head_dim != hidden / heads for the target, GQA, untied),
# much smaller, for a smoke test of the whole path in well under a minute of training
TINY = dict(
    draft=dict(n_layers=2, hidden=256, n_heads=4, head_dim=64, n_kv_heads=2, ffn=704),
    target=dict(n_layers=2, hidden=384, n_heads=4, head_dim=128, n_kv_heads=2, ffn=1024),
    target_layers=6,
    batch=16, seq=256,
    max_chars=8_000_000,
    sp_sample_bytes=4_000_000,
    train_seconds=20.0,
    eval_batches=4, eval_batch=8,
    log_every=25,
)

VOCAB = 8192
ROPE_THETA = 10000.0
RMS_EPS = 1e-5
INIT_STD = 0.02
BOS_ID, EOS_ID, UNK_ID = 1, 2, 0
MAX_POS = 4096
MIN_FILE, MAX_FILE = 200, 300_000


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output folder (target-hf, draft-hf, pair.json)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--train-seconds", type=float, default=None, help="wall-time training budget (default 300; tiny 20)")
    p.add_argument("--max-chars", type=int, default=None, help="corpus cap in characters (default 150e6; tiny 8e6)")
    p.add_argument("--tiny", action="store_true", help="small models and corpus, ~20 s of training (smoke test)")
    p.add_argument("--target-layers", type=int, default=None, help="pad the target to this many layers (default 36; tiny 6)")
    p.add_argument("--sp-sample-bytes", type=int, default=None, help="SentencePiece training sample size (default 20e6)")
    p.add_argument("--workers", type=int, default=None, help="processes for tokenizing the corpus (default min(8, cpus))")
    p.add_argument("--sp-threads", type=int, default=None, help="threads for SentencePiece training (default min(16, cpus))")
    p.add_argument("--steps", type=int, default=None,
                   help="train for exactly this many steps, cosine over steps, instead of a wall-time budget "
                        "(step counts then do not depend on how busy the GPU is)")
    p.add_argument("--lr-target", type=float, default=6e-4)
    p.add_argument("--lr-draft", type=float, default=1.5e-3)
    p.add_argument("--warmup-steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--seq", type=int, default=None)
    p.add_argument("--no-hf-check", action="store_true", help="skip loading the written folders with transformers")
    p.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    return p.parse_args()


# ----------------------------------------------------------------------------
# corpus
# ----------------------------------------------------------------------------

def stdlib_roots() -> list[str]:
    paths = sysconfig.get_paths()
    out = []
    for k in ("stdlib", "platstdlib"):
        c = paths.get(k)
        if c and os.path.isdir(c) and os.path.realpath(c) not in out:
            out.append(os.path.realpath(c))
    return out


def source_roots() -> list[str]:
    roots = []
    paths = sysconfig.get_paths()
    cand = []
    try:
        cand += list(site.getsitepackages())
    except Exception:  # virtualenvs of old style
        pass
    cand += [paths.get("purelib"), paths.get("platlib"), paths.get("stdlib"), paths.get("platstdlib")]
    for c in cand:
        if c and os.path.isdir(c):
            r = os.path.realpath(c)
            if r not in roots:
                roots.append(r)
    return roots


def list_py_files(roots: list[str], stdlib_roots: list[str]) -> tuple[list[tuple[str, int]], dict]:
    """All .py files under the roots with their sizes (realpath-deduplicated)."""
    seen: set[str] = set()
    out: list[tuple[str, int]] = []
    n_all = n_size = 0
    roots_sorted = sorted(roots, key=len)
    for root in roots_sorted:
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            # only the running interpreter's own site-packages: another installation's
            # site-/dist-packages under the stdlib folder is left out
            if root in stdlib_roots:
                dirnames[:] = [d for d in dirnames if d not in ("site-packages", "dist-packages")
                               or os.path.join(dirpath, d) in roots_sorted]
            # a root nested in another root (site-packages under stdlib's lib dir) is walked once
            if dirpath != root and dirpath in roots_sorted:
                dirnames[:] = []
                continue
            for fn in filenames:
                if not fn.endswith(".py"):
                    continue
                path = os.path.join(dirpath, fn)
                try:
                    rp = os.path.realpath(path)
                    if rp in seen:
                        continue
                    seen.add(rp)
                    st = os.stat(rp)
                except OSError:
                    continue
                n_all += 1
                if MIN_FILE <= st.st_size <= MAX_FILE:
                    out.append((rp, st.st_size))
                else:
                    n_size += 1
    out.sort()
    return out, dict(py_files_found=n_all, py_files_outside_size_range=n_size)


def build_corpus(seed: int, max_chars: int) -> tuple[list[str], dict]:
    t0 = time.time()
    roots = source_roots()
    std = stdlib_roots()
    files, stats = list_py_files(roots, std)
    stats["stdlib_roots"] = std
    rng = random.Random(seed)
    rng.shuffle(files)
    docs: list[str] = []
    hashes: set[bytes] = set()
    total = 0
    n_dup = n_bad = 0
    bytes_read = 0
    for path, _size in files:
        if total >= max_chars:
            break
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError:
            n_bad += 1
            continue
        bytes_read += len(raw)
        if not (MIN_FILE <= len(raw) <= MAX_FILE):
            n_bad += 1
            continue
        h = hashlib.sha256(raw).digest()
        if h in hashes:
            n_dup += 1
            continue
        hashes.add(h)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            n_bad += 1
            continue
        if "\x00" in text:
            n_bad += 1
            continue
        if total + len(text) > max_chars:
            text = text[: max_chars - total]
        docs.append(text)
        total += len(text)
    stats.update(
        roots=roots,
        py_files_in_size_range=len(files),
        files_used=len(docs),
        duplicates_skipped=n_dup,
        unreadable_or_non_utf8_skipped=n_bad,
        chars=total,
        max_chars=max_chars,
        cap_reached=total >= max_chars,
        bytes_read=bytes_read,
        seconds=round(time.time() - t0, 2),
    )
    return docs, stats


# ----------------------------------------------------------------------------
# tokenizer
# ----------------------------------------------------------------------------

SP_SETTINGS = dict(
    model_type="bpe",
    vocab_size=VOCAB,
    byte_fallback=True,
    normalization_rule_name="identity",
    remove_extra_whitespaces=False,
    allow_whitespace_only_pieces=True,
    split_digits=True,
    add_dummy_prefix=False,
    unk_id=UNK_ID,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    pad_id=-1,
    character_coverage=0.9995,
    max_sentence_length=8192,
    input_sentence_size=0,
    shuffle_input_sentence=True,
    hard_vocab_limit=True,
)


def train_tokenizer(docs: list[str], seed: int, sample_bytes: int, prefix: str, threads: int) -> dict:
    import sentencepiece as spm

    t0 = time.time()
    total = sum(len(d) for d in docs)
    rng = random.Random(seed + 1)
    p = min(1.0, 1.2 * sample_bytes / max(1, total))
    sample_path = prefix + ".sample.txt"
    n_lines = n_bytes = 0
    with open(sample_path, "w", encoding="utf-8") as f:
        done = False
        for d in docs:
            for line in d.split("\n"):
                line = line.rstrip("\r")  # CRLF files: no pieces ending in a carriage return
                if not line.strip() or rng.random() >= p:
                    continue
                b = len(line.encode("utf-8")) + 1
                f.write(line)
                f.write("\n")
                n_lines += 1
                n_bytes += b
                if n_bytes >= sample_bytes:
                    done = True
                    break
            if done:
                break
    t1 = time.time()
    settings = dict(SP_SETTINGS, input=sample_path, model_prefix=prefix, num_threads=threads,
                    seed_sentencepiece_size=1_000_000, minloglevel=1)
    # sentencepiece wants its own random seed for shuffling; keep it derived from ours
    try:
        spm.set_random_generator_seed(seed)
    except Exception:
        pass
    spm.SentencePieceTrainer.train(**settings)
    t2 = time.time()
    os.remove(sample_path)
    return dict(
        settings={k: v for k, v in SP_SETTINGS.items()},
        num_threads=threads,
        sample_lines=n_lines,
        sample_bytes=n_bytes,
        sample_seconds=round(t1 - t0, 2),
        train_seconds=round(t2 - t1, 2),
    )


_SP = None
_DOCS: list[str] = []


def _tok_init(model_path: str) -> None:
    global _SP
    import sentencepiece as spm

    _SP = spm.SentencePieceProcessor(model_file=model_path)


def _tok_range(rng_: tuple[int, int]) -> bytes:
    lo, hi = rng_
    parts = []
    for ids in _SP.encode(_DOCS[lo:hi]):
        a = np.empty(len(ids) + 1, dtype=np.uint16)
        a[0] = BOS_ID
        a[1:] = ids
        parts.append(a)
    return np.concatenate(parts).tobytes() if parts else b""


def tokenize_corpus(docs: list[str], model_path: str, workers: int) -> np.ndarray:
    global _DOCS
    _DOCS = docs
    chunk = 64
    ranges = [(i, min(i + chunk, len(docs))) for i in range(0, len(docs), chunk)]
    if workers <= 1:
        _tok_init(model_path)
        out = [_tok_range(r) for r in ranges]
    else:
        ctx = mp.get_context("fork")
        with ctx.Pool(workers, initializer=_tok_init, initargs=(model_path,)) as pool:
            out = list(pool.imap(_tok_range, ranges))
    _DOCS = []
    return np.frombuffer(b"".join(out), dtype=np.uint16).copy()


# ----------------------------------------------------------------------------
# model (plain PyTorch, Hugging Face Llama parameter names and layout)
# ----------------------------------------------------------------------------

import torch  # noqa: E402  (imported after the fork-safe helpers above; no torch op runs before the pool)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(dt)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Attention(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.h, self.kv, self.d = c["n_heads"], c["n_kv_heads"], c["head_dim"]
        self.q_proj = nn.Linear(c["hidden"], self.h * self.d, bias=False)
        self.k_proj = nn.Linear(c["hidden"], self.kv * self.d, bias=False)
        self.v_proj = nn.Linear(c["hidden"], self.kv * self.d, bias=False)
        self.o_proj = nn.Linear(self.h * self.d, c["hidden"], bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
        cos_, sin_ = cos.to(q.dtype), sin.to(q.dtype)
        q = q * cos_ + rotate_half(q) * sin_
        k = k * cos_ + rotate_half(k) * sin_
        rep = self.h // self.kv
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        if HAS_SDPA:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # old torch (local CPU tests only)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.d)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            s = s.masked_fill(~mask, float("-inf"))
            o = torch.softmax(s.float(), dim=-1).to(v.dtype) @ v
        o = o.transpose(1, 2).reshape(b, t, self.h * self.d)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.gate_proj = nn.Linear(c["hidden"], c["ffn"], bias=False)
        self.up_proj = nn.Linear(c["hidden"], c["ffn"], bias=False)
        self.down_proj = nn.Linear(c["ffn"], c["hidden"], bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden"], RMS_EPS)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden"], RMS_EPS)
        self.mlp = MLP(c)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Inner(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, c["hidden"])
        self.layers = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        self.norm = RMSNorm(c["hidden"], RMS_EPS)


class Llama(nn.Module):
    """state_dict() keys are exactly the Hugging Face LlamaForCausalLM names."""

    def __init__(self, c: dict):
        super().__init__()
        self.c = c
        self.model = Inner(c)
        self.lm_head = nn.Linear(c["hidden"], VOCAB, bias=False)
        d = c["head_dim"]
        inv = 1.0 / (ROPE_THETA ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        self.register_buffer("inv_freq", inv, persistent=False)

    def rope(self, t: int, device):
        pos = torch.arange(t, device=device, dtype=torch.float32)
        fr = torch.outer(pos, self.inv_freq.to(device).float())
        emb = torch.cat((fr, fr), dim=-1)
        return emb.cos()[None, None], emb.sin()[None, None]

    def forward(self, ids):
        cos, sin = self.rope(ids.shape[1], ids.device)
        x = self.model.embed_tokens(ids)
        for blk in self.model.layers:
            x = blk(x, cos, sin)
        return self.lm_head(self.model.norm(x))

    def init_weights(self, std: float = INIT_STD) -> None:
        n = self.c["n_layers"]
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.ones_(p)
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * n))
            else:
                nn.init.normal_(p, 0.0, std)


def build(c: dict, device: str) -> Llama:
    """Construct directly on the device where torch allows it (no 15 GB fp32 detour through host RAM)."""
    try:
        with torch.device(device):
            return Llama(c)
    except (AttributeError, TypeError):  # torch < 2.0
        return Llama(c).to(device)


def n_params(c: dict) -> int:
    h, f = c["hidden"], c["ffn"]
    qd, kvd = c["n_heads"] * c["head_dim"], c["n_kv_heads"] * c["head_dim"]
    per = h * qd + 2 * h * kvd + qd * h + 3 * h * f + 2 * h
    return c["n_layers"] * per + 2 * VOCAB * h + h


# ----------------------------------------------------------------------------
# Hugging Face folder
# ----------------------------------------------------------------------------

def hf_config(c: dict) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": VOCAB,
        "hidden_size": c["hidden"],
        "intermediate_size": c["ffn"],
        "num_hidden_layers": c["n_layers"],
        "num_attention_heads": c["n_heads"],
        "num_key_value_heads": c["n_kv_heads"],
        "head_dim": c["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POS,
        "initializer_range": INIT_STD,
        "rms_norm_eps": RMS_EPS,
        "rope_theta": ROPE_THETA,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "pretraining_tp": 1,
        "tie_word_embeddings": False,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "use_cache": True,
        "torch_dtype": "float16",
    }


TOKENIZER_CONFIG = {
    "tokenizer_class": "LlamaTokenizer",
    "add_bos_token": True,
    "add_eos_token": False,
    # the tokenizer was trained without a dummy prefix: llama.cpp must not add one
    # (convert_hf_to_gguf.py writes tokenizer.ggml.add_space_prefix from this)
    "add_prefix_space": False,
    "legacy": False,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "pad_token": None,
    "clean_up_tokenization_spaces": False,
    "model_max_length": MAX_POS,
    "sp_model_kwargs": {},
    "spaces_between_special_tokens": False,
}

SPECIAL_TOKENS_MAP = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


def write_safetensors(path: str, items) -> int:
    """items: list of (name, tensor-producing callable or tensor). Writes F16, streaming."""
    metas = []
    off = 0
    for name, shape, _get in items:
        nbytes = 2 * int(np.prod(shape))
        metas.append((name, shape, off, off + nbytes))
        off += nbytes
    header = {"__metadata__": {"format": "pt"}}
    for name, shape, b, e in metas:
        header[name] = {"dtype": "F16", "shape": list(shape), "data_offsets": [b, e]}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for (name, shape, get), (_, _, b, e) in zip(items, metas):
            t = get()
            assert tuple(t.shape) == tuple(shape), (name, t.shape, shape)
            a = t.detach().to(torch.float16).contiguous().cpu().numpy()
            assert a.nbytes == e - b
            f.write(memoryview(a).cast("B"))
    return 8 + len(hb) + off


def write_hf_folder(out_dir: str, c: dict, items, tok_model: str) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    st_path = os.path.join(out_dir, "model.safetensors")
    size = write_safetensors(st_path, items)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(hf_config(c), f, indent=2)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": BOS_ID, "eos_token_id": EOS_ID}, f, indent=2)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(TOKENIZER_CONFIG, f, indent=2)
    with open(os.path.join(out_dir, "special_tokens_map.json"), "w") as f:
        json.dump(SPECIAL_TOKENS_MAP, f, indent=2)
    with open(tok_model, "rb") as src, open(os.path.join(out_dir, "tokenizer.model"), "wb") as dst:
        dst.write(src.read())
    return {"dir": out_dir, "safetensors_bytes": size}


def layer_names(i: int) -> list[str]:
    p = f"model.layers.{i}."
    return [p + s for s in (
        "input_layernorm.weight",
        "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
        "post_attention_layernorm.weight",
        "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
    )]


def param_shapes(c: dict, i: int) -> dict:
    h, f = c["hidden"], c["ffn"]
    qd, kvd = c["n_heads"] * c["head_dim"], c["n_kv_heads"] * c["head_dim"]
    p = f"model.layers.{i}."
    return {
        p + "input_layernorm.weight": (h,),
        p + "self_attn.q_proj.weight": (qd, h),
        p + "self_attn.k_proj.weight": (kvd, h),
        p + "self_attn.v_proj.weight": (kvd, h),
        p + "self_attn.o_proj.weight": (h, qd),
        p + "post_attention_layernorm.weight": (h,),
        p + "mlp.gate_proj.weight": (f, h),
        p + "mlp.up_proj.weight": (f, h),
        p + "mlp.down_proj.weight": (h, f),
    }


def pad_tensor(name: str, shape, seed: int, layer: int, device) -> torch.Tensor:
    """Weights of an appended identity layer (made the same way every time they are asked for)."""
    if name.endswith("layernorm.weight"):
        return torch.ones(shape, dtype=torch.float16, device=device)
    if name.endswith(("o_proj.weight", "down_proj.weight")):
        return torch.zeros(shape, dtype=torch.float16, device=device)
    kinds = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
    k = [i for i, s in enumerate(kinds) if f".{s}." in name][0]
    g = torch.Generator(device=device)
    g.manual_seed(seed * 1_000_003 + layer * 16 + k)
    return (torch.randn(shape, generator=g, device=device, dtype=torch.float32) * INIT_STD).to(torch.float16)


def ordered_items(c_out: dict, sd16: dict, n_core: int, seed: int, device) -> list:
    """(name, shape, getter) for every tensor of the written model, core then padding."""
    items = [("model.embed_tokens.weight", tuple(sd16["model.embed_tokens.weight"].shape),
              (lambda n="model.embed_tokens.weight": sd16[n]))]
    for i in range(c_out["n_layers"]):
        shapes = param_shapes(c_out, i)
        for name in layer_names(i):
            if i < n_core:
                items.append((name, shapes[name], (lambda n=name: sd16[n])))
            else:
                items.append((name, shapes[name], (lambda n=name, s=shapes[name], l=i: pad_tensor(n, s, seed, l, device))))
    for name in ("model.norm.weight", "lm_head.weight"):
        items.append((name, tuple(sd16[name].shape), (lambda n=name: sd16[n])))
    return items


# ----------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------

def make_opt(model: nn.Module, lr: float, device: str):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    fused = False
    if device == "cuda":
        try:
            opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
            fused = True
            return opt, fused
        except (TypeError, RuntimeError):
            pass
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8), fused


def lr_factor(step: int, progress: float, warmup: int) -> float:
    w = min(1.0, (step + 1) / warmup)
    p = min(1.0, progress)
    return w * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * p)))


@torch.no_grad()
def evaluate(tgt, dft, tok, lo: int, hi: int, n_batches: int, bs: int, seq: int, autocast) -> dict:
    tgt.eval(); dft.eval()
    n_win = n_batches * bs
    span = hi - lo - seq - 1
    starts = [lo + (span * k) // max(1, n_win - 1) for k in range(n_win)]
    ar = torch.arange(seq + 1, device=tok.device)
    sums = dict(lt=0.0, ld=0.0, at=0, ad=0, agree=0, n=0)
    for b in range(n_batches):
        s = torch.tensor(starts[b * bs:(b + 1) * bs], device=tok.device)
        chunk = tok[s[:, None] + ar[None, :]].long()
        x, y = chunk[:, :-1], chunk[:, 1:]
        with autocast():
            lt_, ld_ = tgt(x), dft(x)
        lt_, ld_ = lt_.float(), ld_.float()
        sums["lt"] += F.cross_entropy(lt_.reshape(-1, VOCAB), y.reshape(-1), reduction="sum").item()
        sums["ld"] += F.cross_entropy(ld_.reshape(-1, VOCAB), y.reshape(-1), reduction="sum").item()
        pt, pd = lt_.argmax(-1), ld_.argmax(-1)
        sums["at"] += (pt == y).sum().item()
        sums["ad"] += (pd == y).sum().item()
        sums["agree"] += (pt == pd).sum().item()
        sums["n"] += y.numel()
    tgt.train(); dft.train()
    n = sums["n"]
    return dict(
        tokens=n, windows=n_win, seq=seq,
        target_loss=round(sums["lt"] / n, 4), draft_loss=round(sums["ld"] / n, 4),
        target_top1=round(sums["at"] / n, 4), draft_top1=round(sums["ad"] / n, 4),
        draft_target_top1_agreement=round(sums["agree"] / n, 4),
    )


def main() -> int:
    a = parse_args()
    S = dict(TINY if a.tiny else FULL)
    train_seconds = a.train_seconds if a.train_seconds is not None else S["train_seconds"]
    max_chars = a.max_chars if a.max_chars is not None else S["max_chars"]
    target_layers = a.target_layers if a.target_layers is not None else S["target_layers"]
    sp_sample = a.sp_sample_bytes if a.sp_sample_bytes is not None else S["sp_sample_bytes"]
    batch = a.batch or S["batch"]
    seq = a.seq or S["seq"]
    cpus = os.cpu_count() or 1
    workers = a.workers or max(1, min(8, cpus))
    sp_threads = a.sp_threads or max(1, min(16, cpus))
    device = a.device or "auto"  # resolved after tokenizing: the tokenizer pool forks, CUDA must not be touched before
    cd, ct = dict(S["draft"]), dict(S["target"])
    assert target_layers >= ct["n_layers"]

    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    work = os.path.join(out, "work")
    os.makedirs(work, exist_ok=True)
    timings: dict = {}
    rec: dict = dict(
        script="scripts/make_pair.py",
        argv=sys.argv,
        mode="tiny" if a.tiny else "full",
        seed=a.seed,
        host=socket.gethostname(),
        started_unix=round(T_START, 1),
        versions=dict(python=platform.python_version(), torch=torch.__version__, numpy=np.__version__),
    )
    try:
        import sentencepiece
        rec["versions"]["sentencepiece"] = sentencepiece.__version__
    except Exception:
        pass
    log(f"out={out} seed={a.seed} mode={rec['mode']} train_seconds={train_seconds} "
        f"max_chars={max_chars} workers={workers} sp_threads={sp_threads}")

    # ---- corpus
    t = time.time()
    docs, cstats = build_corpus(a.seed, max_chars)
    timings["corpus_s"] = round(time.time() - t, 2)
    log(f"corpus: {cstats['files_used']} files, {cstats['chars'] / 1e6:.2f} M chars "
        f"(found {cstats['py_files_found']} .py, {cstats['py_files_in_size_range']} in size range, "
        f"{cstats['duplicates_skipped']} dup, {cstats['unreadable_or_non_utf8_skipped']} skipped) in {timings['corpus_s']} s")
    if not docs:
        log("no corpus files found")
        return 2

    # ---- tokenizer
    t = time.time()
    prefix = os.path.join(work, "tokenizer")
    tstats = train_tokenizer(docs, a.seed, sp_sample, prefix, sp_threads)
    tok_model = prefix + ".model"
    timings["tokenizer_s"] = round(time.time() - t, 2)
    with open(tok_model, "rb") as f:
        tstats["sha256"] = hashlib.sha256(f.read()).hexdigest()
    log(f"tokenizer: {tstats['sample_lines']} lines / {tstats['sample_bytes'] / 1e6:.1f} MB sample, "
        f"trained in {tstats['train_seconds']} s, sha256 {tstats['sha256'][:16]}")

    # ---- tokenize corpus (processes; before any CUDA work, the pool forks)
    t = time.time()
    ids = tokenize_corpus(docs, tok_model, workers)
    timings["tokenize_s"] = round(time.time() - t, 2)
    n_tok = int(ids.size)
    cstats.update(tokens=n_tok, chars_per_token=round(cstats["chars"] / n_tok, 3), bos_per_document=True)
    del docs
    n_train = int(n_tok * 0.99)
    cstats.update(train_tokens=n_train, heldout_tokens=n_tok - n_train, heldout_fraction=0.01)
    log(f"tokenized: {n_tok} tokens ({cstats['chars_per_token']} chars/token) in {timings['tokenize_s']} s "
        f"with {workers} processes; train {n_train}, held out {n_tok - n_train}")
    need = 2 * (seq + 1)
    if n_tok - n_train < need or n_train < need:
        log("corpus too small for this sequence length")
        return 2

    # ---- models
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    rec["device"] = device
    torch.manual_seed(a.seed)
    torch.set_num_threads(max(1, min(4, cpus)) if device == "cuda" else cpus)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        rec["gpu"] = torch.cuda.get_device_name(0)
    tok = torch.from_numpy(ids.astype(np.int32)).to(device)
    del ids
    tgt = build(ct, device)
    dft = build(cd, device)
    tgt.init_weights(); dft.init_weights()
    np_t = sum(p.numel() for p in tgt.parameters())
    np_d = sum(p.numel() for p in dft.parameters())
    assert np_t == n_params(ct) and np_d == n_params(cd)
    ct_pad = dict(ct, n_layers=target_layers)
    log(f"target core {np_t / 1e6:.1f} M params ({ct['n_layers']} layers), padded {n_params(ct_pad) / 1e6:.1f} M "
        f"({target_layers} layers); draft {np_d / 1e6:.1f} M params")
    opt_t, fused_t = make_opt(tgt, a.lr_target, device)
    opt_d, _ = make_opt(dft, a.lr_draft, device)
    use_bf16 = device == "cuda"

    def autocast():
        if use_bf16:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return torch.autocast("cpu", enabled=False)

    g = torch.Generator(device=device)
    g.manual_seed(a.seed)
    ar = torch.arange(seq + 1, device=device)
    hi_start = n_train - seq - 1

    # ---- train (same batches for both models, fixed wall time)
    log(f"training: batch {batch} x {seq}, lr target {a.lr_target}, draft {a.lr_draft}, warm-up {a.warmup_steps} "
        f"steps, cosine to 10% over {f'{a.steps} steps' if a.steps else f'{train_seconds} s'}, bf16 autocast={use_bf16}, sdpa={HAS_SDPA}, fused adamw={fused_t}")
    hist = []
    step = 0
    lt = ld = float("nan")
    if device == "cuda":
        torch.cuda.synchronize()
    t_train = time.time()
    elapsed = 0.0
    while (step < a.steps) if a.steps else (elapsed < train_seconds):
        f = lr_factor(step, step / a.steps if a.steps else elapsed / train_seconds, a.warmup_steps)
        for gr in opt_t.param_groups:
            gr["lr"] = a.lr_target * f
        for gr in opt_d.param_groups:
            gr["lr"] = a.lr_draft * f
        s = torch.randint(0, hi_start, (batch,), device=device, generator=g)
        chunk = tok[s[:, None] + ar[None, :]].long()
        x, y = chunk[:, :-1], chunk[:, 1:]
        with autocast():
            out_t = tgt(x)
            out_d = dft(x)
        loss_t = F.cross_entropy(out_t.float().reshape(-1, VOCAB), y.reshape(-1))
        loss_d = F.cross_entropy(out_d.float().reshape(-1, VOCAB), y.reshape(-1))
        (loss_t + loss_d).backward()
        gn_t = torch.nn.utils.clip_grad_norm_(tgt.parameters(), 1.0)
        gn_d = torch.nn.utils.clip_grad_norm_(dft.parameters(), 1.0)
        opt_t.step(); opt_d.step()
        opt_t.zero_grad(set_to_none=True); opt_d.zero_grad(set_to_none=True)
        step += 1
        if device == "cuda":
            torch.cuda.synchronize()
        elapsed = time.time() - t_train
        if step % S["log_every"] == 0 or step == 1:
            lt, ld = loss_t.item(), loss_d.item()
            tps = step * batch * seq / elapsed
            hist.append(dict(step=step, t=round(elapsed, 1), lr_factor=round(f, 4), target_loss=round(lt, 4),
                             draft_loss=round(ld, 4), target_gnorm=round(float(gn_t), 3), draft_gnorm=round(float(gn_d), 3)))
            log(f"step {step:5d} t {elapsed:6.1f}s lr x{f:.3f} loss target {lt:.3f} draft {ld:.3f} "
                f"gnorm {float(gn_t):.2f}/{float(gn_d):.2f} {tps / 1e3:.1f} k tok/s/model")
    train_s = time.time() - t_train
    last_t, last_d = loss_t.item(), loss_d.item()
    timings["train_s"] = round(train_s, 2)
    trec = dict(
        steps=step, seconds=round(train_s, 2),
        budget=(f"{a.steps} steps" if a.steps else f"{train_seconds} s wall time"),
        budget_seconds=None if a.steps else train_seconds, budget_steps=a.steps,
        batch=batch, seq=seq, tokens_per_model=step * batch * seq,
        tokens_per_second_per_model=round(step * batch * seq / train_s, 1),
        lr_target=a.lr_target, lr_draft=a.lr_draft, warmup_steps=a.warmup_steps,
        schedule="linear warm-up over warmup_steps x cosine to 10% of peak over "
                 + ("the step budget" if a.steps else "the wall-time budget"),
        optimizer=dict(name="AdamW", fused=fused_t, betas=[0.9, 0.95], eps=1e-8, weight_decay=0.1,
                       weight_decay_on="params with dim >= 2 (not norms)", grad_clip=1.0),
        init=dict(std=INIT_STD, o_proj_down_proj_std="std / sqrt(2 * n_layers)", norms=1.0),
        precision="bf16 autocast, fp32 master weights" if use_bf16 else "fp32",
        attention="torch sdpa (causal), GQA by repeat_interleave" if HAS_SDPA else "manual",
        batches="uniform random windows of seq+1 tokens from the training 99%, same batch for both models",
        last_train_loss=dict(step=step, target=round(last_t, 4), draft=round(last_d, 4)),
        loss_log=hist,
    )
    log(f"trained {step} steps in {train_s:.1f} s; last loss target {last_t:.3f} draft {last_d:.3f}")

    # ---- held-out eval
    t = time.time()
    ev = evaluate(tgt, dft, tok, n_train, n_tok, S["eval_batches"], S["eval_batch"], seq, autocast)
    timings["eval_s"] = round(time.time() - t, 2)
    log(f"held-out: target loss {ev['target_loss']} top1 {ev['target_top1']}; draft loss {ev['draft_loss']} "
        f"top1 {ev['draft_top1']}; draft/target top-1 agreement {ev['draft_target_top1_agreement']}")

    # ---- f16 weights, padding, padding check (fp32)
    t = time.time()
    sd_t16 = {k: v.detach().to(torch.float16) for k, v in tgt.state_dict().items()}
    sd_d16 = {k: v.detach().to(torch.float16) for k, v in dft.state_dict().items()}
    del opt_t, opt_d, tgt, dft
    if device == "cuda":
        torch.cuda.empty_cache()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    n_chk = 2
    chk_len = min(seq, 256)
    cs = torch.tensor([n_train + 7 + k * (chk_len + 1) for k in range(n_chk)], device=device)
    xs = tok[cs[:, None] + torch.arange(chk_len, device=device)[None, :]].long()
    items_t = ordered_items(ct_pad, sd_t16, ct["n_layers"], a.seed, device)
    items_d = ordered_items(cd, sd_d16, cd["n_layers"], a.seed, device)
    with torch.no_grad():
        core = build(ct, device)
        core.load_state_dict({k: v.float() for k, v in sd_t16.items()})
        logits_core = core(xs).float()
        del core
        padded = build(ct_pad, device)
        pp = dict(padded.named_parameters())
        assert set(pp) == {n for n, _, _ in items_t}
        for n, _, get in items_t:
            pp[n].copy_(get().float())
        del pp
        logits_pad = padded(xs).float()
        del padded
        dmod = build(cd, device)
        dmod.load_state_dict({k: v.float() for k, v in sd_d16.items()})
        logits_draft = dmod(xs).float()
        del dmod
    if device == "cuda":
        torch.cuda.empty_cache()
    pad_diff = (logits_pad - logits_core).abs().max().item()
    zero_ok = all(float(get().abs().max()) == 0.0 for n, _, get in items_t
                  if n.endswith(("o_proj.weight", "down_proj.weight"))
                  and int(n.split(".")[2]) >= ct["n_layers"])
    timings["pad_check_s"] = round(time.time() - t, 2)
    prec = dict(core_layers=ct["n_layers"], padded_layers=target_layers, appended=target_layers - ct["n_layers"],
                appended_init=dict(o_proj="0", down_proj="0", q_k_v_gate_up=f"N(0, {INIT_STD}) seeded", norms=1.0),
                appended_o_down_exactly_zero=zero_ok,
                check=dict(precision="fp32 (tf32 off), weights as written (f16)", sequences=n_chk, tokens_each=chk_len,
                           max_abs_logit_diff_padded_vs_core=pad_diff,
                           max_abs_logit_core=round(logits_core.abs().max().item(), 4)))
    log(f"padding check (fp32, {target_layers} vs {ct['n_layers']} layers): max |diff| = {pad_diff!r}; "
        f"appended o_proj/down_proj all zero: {zero_ok}")

    # ---- write the folders
    t = time.time()
    tdir, ddir = os.path.join(out, "target-hf"), os.path.join(out, "draft-hf")
    wt = write_hf_folder(tdir, ct_pad, items_t, tok_model)
    wd = write_hf_folder(ddir, cd, items_d, tok_model)
    timings["write_s"] = round(time.time() - t, 2)
    log(f"wrote {tdir} ({wt['safetensors_bytes'] / 1e9:.3f} GB) and {ddir} ({wd['safetensors_bytes'] / 1e6:.1f} MB) "
        f"in {timings['write_s']} s")
    del sd_t16, sd_d16, items_t, items_d

    # ---- load the folders as transformers LlamaForCausalLM and compare logits (fp32)
    hfc = {}
    if not a.no_hf_check:
        t = time.time()
        try:
            import transformers
            from transformers import LlamaForCausalLM

            rec["versions"]["transformers"] = transformers.__version__
            for label, d, ref in (("draft", ddir, logits_draft), ("target", tdir, logits_core)):
                try:
                    try:
                        m = LlamaForCausalLM.from_pretrained(d, dtype=torch.float32, device_map=device)
                    except (TypeError, ValueError, ImportError):
                        m = LlamaForCausalLM.from_pretrained(d, torch_dtype=torch.float32)
                    m = m.to(device).eval()
                    with torch.no_grad():
                        lg = m(input_ids=xs).logits.float()
                    del m
                    diff = (lg - ref).abs().max().item()
                    agree = (lg.argmax(-1) == ref.argmax(-1)).float().mean().item()
                    ok = diff < 1e-2 * max(1.0, ref.abs().max().item())
                    hfc[label] = dict(max_abs_logit_diff=diff, argmax_agreement=round(agree, 5), ok=ok,
                                      compared_with="plain-PyTorch fp32 logits of the same f16 weights (target: the unpadded core)")
                    log(f"transformers LlamaForCausalLM {label}: max |diff| vs plain model {diff:.3g}, "
                        f"argmax agreement {agree:.4f} -> {'OK' if ok else 'MISMATCH'}")
                except Exception as e:  # record, keep going: the folders are written already
                    hfc[label] = dict(ok=False, error=f"{type(e).__name__}: {e}"[:500])
                    log(f"transformers check of {label} failed: {hfc[label]['error']}")
                if device == "cuda":
                    torch.cuda.empty_cache()
        except ImportError as e:
            hfc["skipped"] = f"transformers not importable: {e}"
            log(hfc["skipped"])
        timings["hf_check_s"] = round(time.time() - t, 2)

    # ---- record
    timings["total_s"] = round(time.time() - T_START, 2)
    rec.update(
        corpus=cstats,
        tokenizer=tstats,
        models=dict(
            common=dict(vocab=VOCAB, rope_theta=ROPE_THETA, rms_norm_eps=RMS_EPS, tied_embeddings=False,
                        max_position_embeddings=MAX_POS, act="silu", bias=False),
            draft=dict(cd, params=np_d),
            target_core=dict(ct, params=np_t),
            target=dict(ct_pad, params=n_params(ct_pad)),
        ),
        training=trec,
        heldout_eval=ev,
        padding=prec,
        hf_check=hfc,
        files=dict(target=wt, draft=wd, tokenizer_config=TOKENIZER_CONFIG),
        timings=timings,
    )
    with open(os.path.join(out, "pair.json"), "w") as f:
        json.dump(rec, f, indent=2)
    for fn in os.listdir(work):
        os.remove(os.path.join(work, fn))
    os.rmdir(work)
    bad = pad_diff != 0.0 or not zero_ok or any(isinstance(v, dict) and not v.get("ok", True) for v in hfc.values())
    log(f"done in {timings['total_s']} s -> {os.path.join(out, 'pair.json')}" + ("  (CHECKS FAILED)" if bad else ""))
    return 3 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
