"""CompiledArtifact.save(format="binary") writes the artifact atomically.

Upstream:
  https://github.com/pytorch/pytorch/pull/162432  the fix (first in 2.10.0)
  vLLM carries the same fix for torch < 2.10.0 (vllm/compilation/
  compiler_interface.py, _patch_standalone_compile_atomic_save: "Backport of
  pytorch/pytorch#162432 ... preventing corrupt cache files when multiple
  processes compile concurrently").

`torch._inductor.standalone_compile(gm, inputs).save(path=p, format="binary")`
opened `p` with open(p, "wb") and wrote the artifact into it: the file is
truncated first and then filled, in place. Processes that save and load the
same artifact at once (every tensor-parallel rank of a vLLM server starting
from a shared cache) read a partial file, and a save that ends early (killed,
disk full) leaves a truncated artifact behind; CompiledArtifact.load then
fails on it. PR #162432 writes the bytes with torch._inductor.codecache.
write_atomic instead: a temporary file `.<pid>.<thread id>.tmp` beside `p`,
then Path.rename onto `p` (atomic on POSIX; on Windows, where rename does
not replace, write_atomic falls back to copy + remove as it does for every
inductor cache file). A reader sees either the old file or the new one. The
"unpacked" format (a directory, removed and rewritten) is not made atomic by
the PR, nor in 2.15.

Read from torch/_inductor/standalone_compile.py of each wheel:

  release          the binary write                    CompiledArtifact.save
  2.7.1 and older  (no standalone_compile)
  2.8.0 - 2.9.1    open(path, "wb"); file.write(...)   3370fd58e3fbd6d3 (the bug)
  2.10.0           write_atomic(path, ...)             3ec419e88874be0f (abstract)
  2.11.0 - 2.15.0  write_atomic(path, ...)             3ec419e88874be0f (abstract)

From 2.10 CompiledArtifact is an ABC and the writing moved to
CacheCompiledArtifact.save (05e0ece66ace8c6a in 2.10.0, 3c6bb9ea409c7e57 in
2.11.0 - 2.13.0, 449ca4ae9d1b2598 in 2.15.0) and the new AOTCompiledArtifact.
save, both through write_atomic; 2.10 also adds a format header, which this
backport does not (the file stays what 2.8/2.9 load). write_atomic is the same
code in 2.8.0 - 2.10.0 (2.15 only turns its assert into a raise), so the patch
calls the installed one. This patch makes the PR's edit in the installed
method's own source: two lines.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "standalone-compile-atomic-save"

VERIFIED = {"3370fd58e3fbd6d3": "2.8.0 - 2.9.1"}
# From 2.10 CompiledArtifact.save is abstract; CacheCompiledArtifact.save
# and AOTCompiledArtifact.save write with write_atomic.
FIXED = {"3ec419e88874be0f": "2.10.0 - 2.15.0"}

# The lines pytorch/pytorch#162432 changes in the binary branch.
EDITS = [
    ('with open(path, "wb") as file:\n'
     '                file.write(writer.to_bytes())',
     'from torch._inductor.codecache import write_atomic\n'
     '\n'
     '            write_atomic(path, writer.to_bytes())'),
]


def apply(standalone_compile: ModuleType, release: Release) -> Revert:
    """Replace standalone_compile.CompiledArtifact.save by its own source with
    the binary artifact written by write_atomic; return the undo."""
    artifact = standalone_compile.CompiledArtifact
    fixed = _patching.rewritten(vars(artifact)["save"], EDITS, VERIFIED, FIXED)
    return _patching.replace_attribute(artifact, "save", fixed, VERIFIED, FIXED)


# Save an artifact, then save it again with the second save cut off halfway
# (RLIMIT_FSIZE below the artifact's size: the write fails with EFBIG, as a
# killed process or a full disk ends it). Whoever reads the path then, like a
# rank loading the artifact while another saves it, must find the whole
# first artifact. The graph is a single mm, an extern kernel: no C++ compiler.
REPRODUCER = r'''
import os, sys, tempfile
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="standalone_atomic_")
try:
    import resource, signal
    resource.RLIMIT_FSIZE, signal.SIGXFSZ
except (ImportError, AttributeError):
    print("skipped: needs resource.RLIMIT_FSIZE and SIGXFSZ (POSIX)")
    sys.exit(77)
import torch
import torch.fx
from torch._inductor import CompiledArtifact, standalone_compile

def f(x):
    return torch.mm(x, x)

x = torch.arange(16, dtype=torch.float32).reshape(4, 4)
artifact = standalone_compile(torch.fx.symbolic_trace(f), [x],
                              dynamic_shapes="from_example_inputs")
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "artifact.bin")
    artifact.save(path=path, format="binary")
    with open(path, "rb") as file:
        saved = file.read()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(saved) // 2, hard))
    try:
        artifact.save(path=path, format="binary")
    except OSError:
        pass  # EFBIG: the save was cut off
    else:
        raise RuntimeError("RLIMIT_FSIZE did not cut the save off; cannot test")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    with open(path, "rb") as file:
        now = file.read()
    assert now == saved, (
        "CompiledArtifact.save is not atomic: an interrupted save left %d of %d bytes "
        "at the artifact's path" % (len(now), len(saved)))
    out = CompiledArtifact.load(path=path, format="binary")(x)
    out = out[0] if isinstance(out, (list, tuple)) else out
    assert torch.equal(out, f(x)), (out, f(x))
'''

BACKPORT = Backport(
    name=NAME,
    summary="standalone_compile's CompiledArtifact.save(format='binary') replaces the file "
    "atomically, so concurrent loads and interrupted saves never see a partial artifact",
    headline="`CompiledArtifact.save` writes in place: a reader sees a partial artifact",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/162432",
    ),
    first_affected=(2, 8, 0),
    first_fixed=(2, 10, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="CompiledArtifact.save is not atomic",
    readme_symptom=(
        '`standalone_compile(...).save(format="binary")` writes in place: a rank loading '
        "while another saves, or an interrupted save, finds a partial artifact"
    ),
    readme_fix=(
        "upstream's edit to `CompiledArtifact.save`: the binary artifact goes through "
        "inductor's own `write_atomic` (a temporary file renamed over the path)."
    ),
)
