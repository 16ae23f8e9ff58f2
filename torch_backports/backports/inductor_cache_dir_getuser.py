"""Inductor's default cache folder no longer needs a passwd entry for the UID.

Upstream:
  https://github.com/pytorch/pytorch/pull/184208  the fix (in 2.13.0)

default_cache_dir (torch/_inductor/runtime/cache_dir_utils.py) names the
folder `torchinductor_<user>` under the temporary folder, with the user from
getpass.getuser(). That reads LOGNAME, USER, LNAME and USERNAME, then the
passwd entry of the UID, and raises KeyError('getpwuid(): uid not found:
N') where there is none and no variable is set: OpenShift's arbitrary UIDs,
`docker run -u 12345`, a Kubernetes securityContext runAsUser. The first
torch.compile then fails, and on 2.12 the import of torch._inductor.codecache
itself (its module-level _HEADER_DIR calls default_cache_dir). 2.13.0 falls
back to `uid_<N>` (or `unknown_user` where os.getuid is missing) for
KeyError, ModuleNotFoundError (no pwd module) and OSError; this patch makes
that edit in each release's own function, so the rest of it (/var/tmp under
fbcode from 2.8) stays as shipped. TORCHINDUCTOR_CACHE_DIR, where set, was
never affected.

Read from each release's torch/_inductor/runtime/cache_dir_utils.py:

  release            default_cache_dir
  2.7.0              9b72a6227c89eb2b   tempfile.gettempdir() only
  2.9.1 - 2.12.1     2373431b645f0805   (2.9.1, 2.10.0, 2.11.0, 2.12.1) /var/tmp under fbcode
  2.13.0 - 2.15.0    0167e10c543c3e2b   the fix (2.13.0, 2.14.1, 2.15.0)

2.7.1, 2.8.0, 2.9.0 and 2.12.0 are claimed by range; where their function
differs from the verified ones it is left as shipped and reported
unrecognised. No other getpass.getuser() call changed in 2.13.0 (dynamo's
debug and minifier folders, draft export's report keep theirs).

The hook runs when cache_dir_utils has executed, before runtime_utils
re-exports the function and codecache imports it from there; a module that
bound the original earlier is rebound too.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "inductor-cache-dir-getuser"

VERIFIED = {
    "9b72a6227c89eb2b": "2.7.0",
    "2373431b645f0805": "2.9.1 - 2.12.1",
}
FIXED = {"0167e10c543c3e2b": "2.13.0 - 2.15.0"}

# 2.13.0's change, in the dedented source of default_cache_dir: the user
# from getpass when it can be had, else a name made of the UID.
EDITS = [(
    '    sanitized_username = re.sub(r\'[\\\\/:*?"<>|]\', "_", getpass.getuser())\n',
    "    try:\n"
    "        username = getpass.getuser()\n"
    "    except (KeyError, ModuleNotFoundError, OSError):\n"
    '        getuid = getattr(os, "getuid", None)\n'
    '        username = f"uid_{getuid()}" if callable(getuid) else "unknown_user"\n'
    '    sanitized_username = re.sub(r\'[\\\\/:*?"<>|]\', "_", username)\n',
)]

_REEXPORTS = ("torch._inductor.runtime.runtime_utils", "torch._inductor.codecache")


def apply(cache_dir_utils: ModuleType, release: Release) -> Revert:
    """Replace cache_dir_utils.default_cache_dir by the installed one with
    2.13's fallback; return the undo."""
    original, _ = _patching.own_attribute(cache_dir_utils, "default_cache_dir")
    fixed = _patching.rewritten(original, EDITS, VERIFIED, FIXED)
    with _patching.all_or_nothing() as reverts:
        reverts.append(_patching.replace_attribute(cache_dir_utils, "default_cache_dir", fixed,
                                                   VERIFIED, FIXED))
        reverts.append(_patching.rebind(_REEXPORTS, "default_cache_dir", original, fixed))
    return _patching.undo_all(reverts)


# A compile in a process whose UID has no passwd entry and no user variable,
# with inductor's default cache folder: the child runs in a new user
# namespace (unshare --user) that maps such a UID onto this one, so it needs
# no privilege and keeps this user's access to files. Its graph is all views,
# so inductor builds no C++ kernel and the program needs no compiler.
REPRODUCER = r'''
import os, shutil, subprocess, sys, tempfile

uid = None
try:
    import pwd
    for candidate in range(54321, 64000):
        try:
            pwd.getpwuid(candidate)
        except KeyError:
            uid = candidate
            break
except ImportError:
    pass
unshare = shutil.which("unshare")
mapping = ["--user", "--map-user=%s" % uid, "--map-group=%s" % uid]
if uid is None or unshare is None or subprocess.run(
        [unshare, *mapping, "true"], capture_output=True).returncode:
    print("skipped: needs unshare --user (util-linux 2.38+, user namespaces) to run as a UID "
          "with no passwd entry")
    sys.exit(77)

CHILD = """
import torch

def f(x):
    return x.view(2, 4).t()

x = torch.arange(8, dtype=torch.float32)
assert torch.equal(torch.compile(f, backend="inductor")(x), f(x))
from torch._inductor.runtime.cache_dir_utils import default_cache_dir
assert default_cache_dir().endswith("torchinductor_uid_%d"), default_cache_dir()
""" % uid
with tempfile.TemporaryDirectory() as tmp:  # the default cache folder goes under it
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOGNAME", "USER", "LNAME", "USERNAME", "TORCHINDUCTOR_CACHE_DIR")}
    env["TMPDIR"] = tmp
    child = subprocess.run([unshare, *mapping, sys.executable, "-c", CHILD], env=env,
                           capture_output=True, text=True, timeout=900)
sys.stdout.write(child.stdout)
sys.stderr.write(child.stderr)
sys.exit(child.returncode)
'''

BACKPORT = Backport(
    name=NAME,
    summary="inductor's default cache folder is named after the UID (uid_N) where the UID has "
    "no passwd entry and no USER or LOGNAME is set, instead of torch.compile failing with "
    "KeyError: 'getpwuid(): uid not found'",
    headline="`KeyError: 'getpwuid(): uid not found'` from `torch.compile` under a UID with no "
    "passwd entry",
    upstream=("https://github.com/pytorch/pytorch/pull/184208",),
    first_affected=(2, 7, 0),
    first_fixed=(2, 13, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="getpwuid(): uid not found",
    readme_symptom=(
        "`KeyError: 'getpwuid(): uid not found: N'` from the first `torch.compile` (on 2.12 "
        "from `import torch._inductor.codecache`) in a process whose UID has no passwd entry "
        "and no `USER` or `LOGNAME`: OpenShift's arbitrary UIDs, `docker run -u 12345`, a "
        "Kubernetes `runAsUser`; setting `TORCHINDUCTOR_CACHE_DIR` avoided it"
    ),
    readme_fix=(
        "[pytorch#184208]'s edit to `default_cache_dir` in each release's own function: the "
        "user from `getpass.getuser()` where it can be had, else `uid_<N>` (`unknown_user` "
        "without `os.getuid`), so the folder is `torchinductor_uid_<N>` under the temporary "
        "folder. The re-exports in `runtime_utils` and `codecache` get the fixed function."
    ),
)
