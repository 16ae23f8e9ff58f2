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

usage: python3 tools/gpu_run.py --out DIR [--jobs N] [--python PYTHON]
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
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]

TRAIN_STEP = r"""
import json, logging, sys, warnings
import torch
try:
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError:
    print("skipped: needs transformers")
    sys.exit(77)
from torch._dynamo.utils import counters

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
    "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
    "losses": losses,
    "warnings": sorted({"%s: %s" % (w.category.__name__, w.message) for w in seen}),
    "log_warnings": sorted(set(caught)),
    "counters": {group: dict(sorted(counters[group].items()))
                 for group in ("inductor", "aot_autograd") if counters[group]},
}))
"""


def sh(command: List[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, **kw)


def machine() -> Dict[str, str]:
    smi = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]) \
        if any((Path(p) / "nvidia-smi").exists() for p in os.environ.get("PATH", "").split(":")) \
        else None
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "gpu": smi.stdout.strip() if smi and smi.returncode == 0 else "none"}


def install(python: Path) -> None:
    """Install this checkout into `python`'s own environment, offline. A
    venv beside it would not do: the GPU image's python3 is itself a venv
    (/opt/torch/.venv), whose packages a `--system-site-packages` venv does
    not see. The machine is bare and given back afterwards."""
    done = sh([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
               "--no-index", ROOT])
    if done.returncode:
        raise SystemExit("installing torch-backports failed:\n" + done.stderr)


def train_step(python: Path, stock: bool) -> dict:
    """The train step in a cold cache, then again in a new process on the
    warm one; each result is what the program printed (or why it failed)."""
    cache = tempfile.mkdtemp(prefix="tb-gpu-cache-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_BACKPORTS_")}
    env.update(TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=os.path.join(cache, "triton"))
    if stock:
        env["TORCH_BACKPORTS_DISABLE"] = "1"
    runs = {}
    for which in ("cold", "warm"):
        done = sh([python, "-c", TRAIN_STEP], env=env, timeout=900)
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
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = machine()
    python = Path(args.python)
    install(python)
    results["torch"] = sh([python, "-c", "import torch; print(torch.__version__)"]).stdout.strip()
    names = sh([python, "-c", "from torch_backports import _registry as r; print(' '.join("
                "n for n in r.names() if r.load(n).cpu_check))"]).stdout.split()
    verify = sh([python, "-m", "torch_backports", "verify", "--json", "--anyway", "-j", args.jobs]
                + names, timeout=1800) if names else None
    results["reproducers"] = json.loads(verify.stdout) if verify and verify.stdout.strip() else {
        "error": verify.stderr[-4000:] if verify else "no backport of GPU code"}
    stock, fixed = train_step(python, stock=True), train_step(python, stock=False)
    results["train_step"] = {"stock": stock, "with_torch_backports": fixed,
                             "differences": compare(stock, fixed)}
    (out / "gpu-results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps({"torch": results["torch"], "gpu": results["gpu"],
                      "verify": results["reproducers"].get("status"),
                      "train_step_differences": results["train_step"]["differences"]}, indent=2))
    return 0 if not results["train_step"]["differences"] else 1


if __name__ == "__main__":
    sys.exit(main())
