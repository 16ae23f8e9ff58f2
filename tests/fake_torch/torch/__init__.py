"""A fake `torch` for the fast unit tests; no real torch code is copied here.

It mirrors the module path and class shapes that torch-backports touches:
torch.__version__ and torch._inductor.codecache's FxGraphCachePickler and
BypassFxGraphCache. FAKE_TORCH_VERSION picks the release whose
FxGraphCachePickler.dumps it imitates: 2.9.1 (the default for 2.6 - 2.9),
2.10.0 or 2.11.0 (see codecache.py). FAKE_TORCH_FAULT breaks it on purpose
for the fault-injection tests.
"""

import os

_fault = os.environ.get("FAKE_TORCH_FAULT", "")
if _fault == "import-raises":
    raise RuntimeError("fake torch: import torch fails on purpose")

__version__ = os.environ.get("FAKE_TORCH_VERSION", "2.10.0+cpu")
if _fault == "garbage-version":
    __version__ = "not a version!"
elif _fault == "version-not-str":
    __version__ = None

# Real torch's __init__ imports its own submodules from its first lines on
# (torch._utils in every release 2.6 - 2.15); torch-backports arms at the
# first of them, so the fake does the same.
from torch import _utils  # noqa: E402,F401
