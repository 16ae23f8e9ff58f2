"""The GPU run: the one prepared script for a lent GPU machine.

It installs this checkout into the environment of the machine's own torch
(no index: the machine reaches nothing outside), then runs, each stock (TORCH_BACKPORTS_DISABLE) and with torch-backports:

* the reproducers of the backports of GPU code (those with a `cpu_check`),
  through `torch-backports verify --json`, which turns a backport that is
  off by default on for its fixed run;
* a small compiled train step: a 2-layer Llama built from a transformers
  config with random weights, three forward and backward steps in a cold
  inductor cache and three more in a second process on the warm cache,
  comparing the losses, the warnings and the cache counters of the two.

It writes OUT/gpu-results.json: date, torch, GPU, and what each run printed.
Commit it as tests/gpu-results/<torch release>.json; tools/readme.py marks
those cells of the compatibility table `✔ GPU`. Without a GPU it still runs
(the reproducers skip, the train step runs on the CPU), which is how it is
tested here.

Every step gets what is left of --budget (540 s: a lent machine runs one
command for at most 600), and the results file is written after each, so a
run cut short keeps what it did. The train step uses transformers' Llama
where the image has transformers, and the same architecture written out
here where it does not ("model" in the results says which).

usage: python3 tools/gpu_run.py --out DIR [--jobs N] [--python PYTHON]
                                [--wheel WHEEL] [--budget SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]

TRAIN_STEP = r"""
import json, logging, sys, warnings
import torch
from torch._dynamo.utils import counters
try:
    from transformers import LlamaConfig, LlamaForCausalLM
    MODEL = "transformers LlamaForCausalLM"
except ImportError:
    # Images without transformers get the same architecture, written out:
    # RMSNorm, rotary attention with grouped KV heads, a SwiGLU MLP, tied to
    # nothing, with the loss transformers computes.
    MODEL = "built-in Llama (no transformers)"
    import torch.nn as nn
    import torch.nn.functional as F

    class LlamaConfig:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    class Attention(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.h, self.kv, self.d = (c.num_attention_heads, c.num_key_value_heads,
                                       c.hidden_size // c.num_attention_heads)
            self.q = nn.Linear(c.hidden_size, self.h * self.d, bias=False)
            self.k = nn.Linear(c.hidden_size, self.kv * self.d, bias=False)
            self.v = nn.Linear(c.hidden_size, self.kv * self.d, bias=False)
            self.o = nn.Linear(self.h * self.d, c.hidden_size, bias=False)

        def forward(self, x, cos, sin):
            b, s, _ = x.shape
            q = self.q(x).view(b, s, self.h, self.d).transpose(1, 2)
            k = self.k(x).view(b, s, self.kv, self.d).transpose(1, 2)
            v = self.v(x).view(b, s, self.kv, self.d).transpose(1, 2)
            def rope(t):
                t1, t2 = t.chunk(2, dim=-1)
                return t * cos + torch.cat((-t2, t1), dim=-1) * sin
            q, k = rope(q), rope(k)
            k = k.repeat_interleave(self.h // self.kv, dim=1)
            v = v.repeat_interleave(self.h // self.kv, dim=1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(y.transpose(1, 2).reshape(b, s, -1))

    class Layer(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.norm1, self.norm2 = nn.RMSNorm(c.hidden_size), nn.RMSNorm(c.hidden_size)
            self.attn = Attention(c)
            self.gate = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
            self.up = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
            self.down = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

        def forward(self, x, cos, sin):
            x = x + self.attn(self.norm1(x), cos, sin)
            h = self.norm2(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    class Output:
        def __init__(self, loss):
            self.loss = loss

    class LlamaForCausalLM(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.embed = nn.Embedding(c.vocab_size, c.hidden_size)
            self.layers = nn.ModuleList(Layer(c) for _ in range(c.num_hidden_layers))
            self.norm = nn.RMSNorm(c.hidden_size)
            self.head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
            d = c.hidden_size // c.num_attention_heads
            inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
            angles = torch.outer(torch.arange(c.max_position_embeddings).float(), inv)
            angles = torch.cat((angles, angles), dim=-1)
            self.register_buffer("cos", angles.cos(), persistent=False)
            self.register_buffer("sin", angles.sin(), persistent=False)

        def forward(self, input_ids, labels):
            s = input_ids.shape[1]
            cos, sin = self.cos[:s], self.sin[:s]
            x = self.embed(input_ids)
            for layer in self.layers:
                x = layer(x, cos, sin)
            logits = self.head(self.norm(x)).float()
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                   labels[:, 1:].reshape(-1))
            return Output(loss)

warnings.simplefilter("always")
caught = []
class Keep(logging.Handler):
    def emit(self, record):
        if record.name.startswith("torch") and record.levelno >= logging.WARNING:
            caught.append("%s: %s" % (record.name, record.getMessage()))
logging.getLogger().addHandler(Keep())

device = "cuda" if torch.cuda.is_available() else "cpu"
config = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     max_position_embeddings=256)
torch.manual_seed(0)
model = LlamaForCausalLM(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
compiled = torch.compile(model)
generator = torch.Generator().manual_seed(0)
losses = []
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    for _ in range(3):
        ids = torch.randint(0, config.vocab_size, (2, 64), generator=generator).to(device)
        loss = compiled(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
print(json.dumps({
    "model": MODEL,
    "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
    "losses": losses,
    "warnings": sorted({"%s: %s" % (w.category.__name__, w.message) for w in seen}),
    "log_warnings": sorted(set(caught)),
    "counters": {group: dict(sorted(counters[group].items()))
                 for group in ("inductor", "aot_autograd") if counters[group]},
}))
"""


class Clock:
    """The run's time: a lent machine allows one command ~10 minutes, so
    every step gets what is left of --budget, and a step that runs out is
    recorded as timed out instead of losing the results before it."""

    def __init__(self, budget: float) -> None:
        self.deadline = time.monotonic() + budget

    def left(self, cap: float) -> float:
        return max(1.0, min(cap, self.deadline - time.monotonic()))


def sh(command: List[str], **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([str(c) for c in command], capture_output=True, text=True, **kw)
    except subprocess.TimeoutExpired as exc:
        said = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        return subprocess.CompletedProcess(exc.cmd, 124, said or "",
                                           "timed out after %.0f s" % exc.timeout)


def machine() -> Dict[str, str]:
    smi = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]) \
        if any((Path(p) / "nvidia-smi").exists() for p in os.environ.get("PATH", "").split(":")) \
        else None
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "gpu": smi.stdout.strip() if smi and smi.returncode == 0 else "none"}


def install(python: Path, wheel: Optional[Path]) -> str:
    """Install torch-backports into `python`'s own environment, offline:
    `wheel` if given (built beforehand with `python -m build` or `pip
    wheel`, and carried to the machine), else this checkout. A venv beside
    it would not do: the GPU image's python3 is itself a venv
    (/opt/torch/.venv), whose packages a `--system-site-packages` venv does
    not see. The machine is bare and given back afterwards."""
    source = wheel if wheel is not None else ROOT
    extra = [] if wheel is not None else ["--no-build-isolation"]
    done = sh([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *extra, source],
              timeout=180)
    if done.returncode:
        raise SystemExit("installing torch-backports failed:\n" + done.stderr)
    return str(source)


def train_step(python: Path, stock: bool, clock: Clock) -> dict:
    """The train step in a cold cache, then again in a new process on the
    warm one; each result is what the program printed (or why it failed)."""
    cache = tempfile.mkdtemp(prefix="tb-gpu-cache-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_BACKPORTS_")}
    env.update(TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=os.path.join(cache, "triton"))
    if stock:
        env["TORCH_BACKPORTS_DISABLE"] = "1"
    runs = {}
    for which in ("cold", "warm"):
        done = sh([python, "-c", TRAIN_STEP], env=env, timeout=clock.left(300))
        if done.returncode == 0:
            runs[which] = json.loads(done.stdout.strip().splitlines()[-1])
        else:
            runs[which] = {"failed": done.returncode, "stdout": done.stdout[-2000:],
                           "stderr": done.stderr[-4000:]}
    return runs


def compare(stock: dict, fixed: dict) -> List[str]:
    """What differs between the stock and the fixed train steps: nothing,
    if torch-backports is no noisier and no less cached."""
    found = []
    for which in ("cold", "warm"):
        a, b = stock.get(which, {}), fixed.get(which, {})
        if "failed" in a or "failed" in b or not a or not b:
            found.append("%s: a run failed (stock %s, fixed %s)"
                         % (which, a.get("failed", "ok"), b.get("failed", "ok")))
            continue
        if any(abs(x - y) > 1e-3 * max(1.0, abs(x)) for x, y in zip(a["losses"], b["losses"])):
            found.append("%s: losses differ: %s vs %s" % (which, a["losses"], b["losses"]))
        for key in ("warnings", "log_warnings", "counters"):
            if a[key] != b[key]:
                found.append("%s: %s differ: stock %s, fixed %s" % (which, key, a[key], b[key]))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for gpu-results.json")
    parser.add_argument("--jobs", default="4", help="reproducer runs at a time")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter whose environment holds torch (default: this one)")
    parser.add_argument("--wheel", type=Path, help="a torch-backports wheel to install "
                        "(default: this checkout)")
    parser.add_argument("--budget", type=float, default=540,
                        help="seconds for the whole run (default 540: a lent machine's command "
                        "may run 600)")
    args = parser.parse_args()
    clock = Clock(args.budget)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = machine()

    def save() -> None:
        # After every step: a run cut off by the machine's limit keeps what it did.
        (out / "gpu-results.json").write_text(json.dumps(results, indent=2))

    python = Path(args.python)
    results["installed"] = install(python, args.wheel)
    results["torch"] = sh([python, "-c", "import torch; print(torch.__version__)"],
                          timeout=120).stdout.strip()
    save()
    names = sh([python, "-c", "from torch_backports import _registry as r; print(' '.join("
                "n for n in r.names() if r.load(n).cpu_check))"], timeout=60).stdout.split()
    verify = sh([python, "-m", "torch_backports", "verify", "--json", "--anyway", "-j", args.jobs]
                + names, timeout=clock.left(args.budget * 0.5)) if names else None
    results["reproducers"] = json.loads(verify.stdout) if verify and verify.stdout.strip() else {
        "error": verify.stderr[-4000:] if verify else "no backport of GPU code"}
    save()
    stock = train_step(python, stock=True, clock=clock)
    results["train_step"] = {"stock": stock}
    save()
    fixed = train_step(python, stock=False, clock=clock)
    results["train_step"] = {"stock": stock, "with_torch_backports": fixed,
                             "differences": compare(stock, fixed)}
    save()
    print(json.dumps({"torch": results["torch"], "gpu": results["gpu"],
                      "verify": results["reproducers"].get("status"),
                      "train_step_differences": results["train_step"]["differences"]}, indent=2))
    return 0 if not results["train_step"]["differences"] else 1


if __name__ == "__main__":
    sys.exit(main())
