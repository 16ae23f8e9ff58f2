"""The description every backport module gives of itself."""

from __future__ import annotations

from types import ModuleType
from typing import Callable, Mapping, Tuple

Release = Tuple[int, int, int]
"""A torch release as (major, minor, micro): 2.10.0+cu128, 2.10.0a0+git... and
2.10.0rc1 are all (2, 10, 0)."""

Revert = Callable[[], None]
"""Undoes a patch; returned by Backport.apply."""


class Backport:
    """One fix from a newer torch, the releases that lack it, and its proof.

    `apply(module, release)` patches `module`, the imported target that the
    registry names, on torch `release`, and returns a callable that reverts
    the patch. It raises before
    changing anything if the code is not what it was verified against
    (torch_backports._patching raises Unrecognised or CarriesFix for that).

    `reproducer` is the source of a small program that uses public torch
    APIs only and never imports torch_backports. On stock torch of an
    affected release it fails, and its stderr contains `symptom`; with the
    fix it exits 0. It exits 77 after printing "skipped: <what it needs>"
    when a prerequisite (a C++ compiler, gloo, a package) is missing.
    `torch-backports verify` and the real-wheel tests run it.

    `changes_codegen` is True for a patch that changes the code inductor
    generates: while it is applied, inductor's graph cache keys name it
    (torch_backports._cache_key), so that its process never loads a graph
    stock torch compiled, nor stock torch one of its own; and it is not
    applied where that cannot be done.

    `verify_without` names other backports whose fixes also hide this one's
    symptom (in the newest torch both fixes are in): verify and the tests
    turn them off in both runs of this reproducer, so that the stock run
    shows the bug and the fixed run shows that this patch alone fixes it.

    `off_by_default`, when not empty, says why the backport is off unless
    TORCH_BACKPORTS_ENABLE names it: a hunk of its change that no CPU test
    in CI executes (GPU-only code), which stays unproven until a GPU run
    records it.

    `cpu_check` is, for a fix of GPU code, a program that drives the
    fixed code path on a CPU-only machine (it may use internal APIs and
    stubs, as a test does): on stock torch of an affected release it fails
    with `cpu_check_symptom` in its output, with the fix it exits 0, and it
    exits 77 after "skipped: ..." when it cannot run. The real-wheel tests
    run it stock and fixed wherever they run the reproducer, which itself
    needs the GPU.

    `headline` is the symptom in one short line of Markdown, the README's
    line for the backport; `readme_symptom` and `readme_fix` are the full
    symptom and the fix, in docs/backports.md. tools/readme.py writes both
    pages from them (a test holds the pages equal).
    """

    # A plain class, not a NamedTuple or a dataclass: this module is imported
    # inside `import torch`, where creating a NamedTuple class cost 3.5 M
    # instructions (callgrind, Python 3.11, 2026-12-04) and a plain one next
    # to nothing.
    __slots__ = ("name", "summary", "upstream", "first_affected", "first_fixed", "apply",
                 "reproducer", "symptom", "changes_codegen", "verify_without",
                 "headline", "readme_symptom", "readme_fix", "off_by_default",
                 "cpu_check", "cpu_check_symptom")

    def __init__(self, *, name: str, summary: str, upstream: Tuple[str, ...],
                 first_affected: Release, first_fixed: Release,
                 apply: Callable[[ModuleType, Release], Revert], reproducer: str,
                 symptom: str, changes_codegen: bool = False,
                 verify_without: Tuple[str, ...] = (), headline: str = "", readme_symptom: str = "",
                 readme_fix: str = "", off_by_default: str = "", cpu_check: str = "",
                 cpu_check_symptom: str = "") -> None:
        self.name = name
        self.summary = summary
        self.upstream = upstream
        self.first_affected = first_affected
        self.first_fixed = first_fixed
        self.apply = apply
        self.reproducer = reproducer
        self.symptom = symptom
        self.changes_codegen = changes_codegen
        self.verify_without = verify_without
        self.headline = headline
        self.readme_symptom = readme_symptom
        self.readme_fix = readme_fix
        self.off_by_default = off_by_default
        self.cpu_check = cpu_check
        self.cpu_check_symptom = cpu_check_symptom

    def disabled_when_verified(self, stock: bool) -> str:
        """TORCH_BACKPORTS_DISABLE's value for a run of the reproducer:
        the backports that would hide the symptom, and this one for stock."""
        return ",".join(((self.name,) if stock else ()) + self.verify_without)

    def __repr__(self) -> str:
        return "<Backport %s %s>" % (self.name, self.affects())

    def affects(self) -> str:
        """The affected releases as a version specifier, e.g. '>=2.6.0,<2.11.0'."""
        return affects(self.first_affected, self.first_fixed)

    def needed_by(self, release: Release) -> bool:
        return self.first_affected <= release < self.first_fixed


def format_release(release: Release) -> str:
    return "%d.%d.%d" % release


def affects(first_affected: Release, first_fixed: Release) -> str:
    """The releases from `first_affected` up to `first_fixed` as a version
    specifier, e.g. '>=2.6.0,<2.11.0'."""
    return ">=%s,<%s" % (format_release(first_affected), format_release(first_fixed))


# The start of a reproducer that compiles with inductor's C++ backend: a
# fresh inductor cache, so that no graph or kernel another run cached is
# loaded instead of compiled; one compile worker; and a skip (exit 77) where
# there is no C++ compiler. The reproducer's own code follows it.
INDUCTOR_CPU_PRELUDE = r"""
import os, sys, tempfile
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
import torch
from torch._inductor import cpp_builder

try:
    cpp_builder.get_cpp_compiler()
except Exception as exc:
    print("skipped: needs a C++ compiler for inductor's CPU backend (%s)" % exc)
    sys.exit(77)
"""

def two_gloo_ranks(rank_program: str) -> str:
    """The source of a reproducer that runs `rank_program` as two gloo ranks
    on the CPU: this interpreter is rank 0, a second one rank 1.

    `rank_program` reads RANK and RENDEZVOUS from the environment and calls
    `dist.init_process_group("gloo", init_method=os.environ["RENDEZVOUS"],
    rank=..., world_size=2)`. The ranks meet in a file, not on a port: a port
    picked free and released can be taken by another program's gloo before
    the store binds it. Each rank that passed leaves by os._exit (QUIT).
    Rank 0 runs in a module named __rank0__ that can be imported, as dynamo
    2.11 imports the module of a global it loads in an inlined frame. The
    reproducer fails where either rank does, with rank 1's output.
    """
    if '"""' in rank_program:
        raise ValueError('a rank program must not contain """')
    return _GLOO_HEADER + 'RANK = r"""' + rank_program + '"""\n' + _GLOO_LAUNCHER


_GLOO_HEADER = r"""
import os, shutil, subprocess, sys, tempfile, types
import torch.distributed as dist

if not dist.is_available() or not dist.is_gloo_available():
    print("skipped: needs torch.distributed with gloo")
    sys.exit(77)

"""

_GLOO_LAUNCHER = r"""
# A rank that has passed leaves at once, without C++ destructors: gloo's
# threads can end a process at its teardown with "terminate called without
# an active exception" (CI, 2.12.1 and 2.14.1, 2026-12-05 and -06), which is
# not what the reproducer tests.
QUIT = "\nimport os, sys\nsys.stdout.flush()\nsys.stderr.flush()\nos._exit(0)\n"
meeting = tempfile.mkdtemp()
env = dict(os.environ, RENDEZVOUS="file://" + os.path.join(meeting, "rendezvous"))
other = subprocess.Popen([sys.executable, "-c", RANK + QUIT], env=dict(env, RANK="1"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
try:
    os.environ.update(env, RANK="0")
    rank0 = types.ModuleType("__rank0__")
    sys.modules[rank0.__name__] = rank0
    exec(compile(RANK, "<rank 0>", "exec"), vars(rank0))
except BaseException:
    other.kill()
    raise
finally:
    try:
        said = other.communicate(timeout=120)[0]
    except subprocess.TimeoutExpired:
        other.kill()
        said = other.communicate()[0]
    shutil.rmtree(meeting, ignore_errors=True)
if other.returncode != 0:
    sys.stderr.write("rank 1 failed:\n" + said)
    sys.exit(1)
exec(QUIT)
"""

Fingerprints = Mapping[str, str]
"""Fingerprint (torch_backports._fingerprint) -> the releases it was read from."""
