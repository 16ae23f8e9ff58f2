"""A compiled program with a DTensor input gets a stable AOTAutograd cache key,
so a second process hits the AOTAutograd cache.

Upstream:
  https://github.com/pytorch/pytorch/pull/173526   AOTAutogradCachePickler.reducer_override,
                                                   DTensor._stable_hash_for_caching (first in 2.12.0)
  https://github.com/pytorch/pytorch/pull/188401   the local tensor's device in that hash (2.15)
  https://github.com/pytorch/pytorch/issues/188390  false cross-rank hits without the device
  https://github.com/pytorch/pytorch/issues/179597  flattened DeviceMesh: cyclic ValueError
  https://github.com/pytorch/pytorch/issues/176532  tensor parallel on 2.11: "Failed to pickle cache key"

autograd_cache_key pickles the compile's example inputs with
AOTAutogradCachePickler. Its dispatch_table maps exact types (torch.Tensor,
FakeTensor), so a DTensor input falls through to Tensor.__reduce_ex__, which
pickles the DTensor's __dict__: its DTensorSpec and through it the DeviceMesh.
What happens then (measured with REPRODUCER, flattened 1-rank mesh):
  2.7.0, 2.9.1  the key is computed but differs in every process: the mesh's
                __dict__ holds `_hash`, which DeviceMesh.__hash__ caches from
                hash() of a tuple holding strs and None. That value varies even with
                PYTHONHASHSEED=0, because hash(None) is address-based before
                Python 3.12. The result is a miss and a new entry written in
                every process.
  2.10.0        a flattened mesh holds a cycle (_root_mesh <-> _flatten_mapping).
                The pickler, in fast mode, refuses it with "ValueError: fast mode:
                can't pickle cyclic objects", and AOTAutogradCache bypasses (INFO log).
  2.11.0        (by source) the same, and dumps also logs the WARNING
                "Failed to pickle cache key" (pytorch#176532).
PR 173526 adds
AOTAutogradCachePickler.reducer_override. It reduces a tensor subclass with
`_stable_hash_for_caching()`, which for DTensor is a blake2b of the spec's repr
with the mesh replaced by its own blake2b. The mesh itself is never pickled.

Read from each wheel's torch/_functorch/_aot_autograd/autograd_cache.py:

  release          AOTAutogradCachePickler    AOT cache on    DTensor hash
                   .reducer_override           by default
  2.6.0            absent                      no (TORCHINDUCTOR_AUTOGRAD_CACHE=1)  none
  2.7.0 - 2.11.0   absent                      yes             none
  2.12.0, 2.12.1   559b30a14ae4d27d (#173526)  yes             spec + requires_grad
  2.13.0           d4191e4ace1d90a9            yes             + FakeScriptObject unwrap (#184001)
  2.15.0           531d81f16d44092f            yes             + local device (#188401)

AOTAutogradCache was added in 2.5, behind a config flag that 2.6 still defaults off. So a
DTensor reaches the key on 2.6 only with TORCHINDUCTOR_AUTOGRAD_CACHE=1, and
on every compile from 2.7. `_ident` is imported into autograd_cache from
torch._inductor.codecache in 2.6 - 2.15. The base FxGraphCachePickler has no
reducer_override before 2.13. DeviceMesh becomes an opaque FakeScriptObject
only in 2.12, so on 2.6 - 2.11 `spec.mesh` is always a real DeviceMesh.

The patch sets AOTAutogradCachePickler.reducer_override, which the class lacks, to
a function written from PR 173526 (DTensor branch only) and PR 188401. For a
DTensor it returns `(_ident, (key,))`, and for anything else the parent's
reducer_override (none on 2.6 - 2.11) or NotImplemented. The C pickler
looks reducer_override up once, in __init__, and autograd_cache_key builds a
new AOTAutogradCachePickler per key, so the class attribute takes effect from
the next compile on.

The key is built the way 2.15 builds it, from plain values only (ints, strs,
tuples, dtypes, placement reprs; no id(), no hash(), no cached _hash):
  mesh_hash = blake2b(repr(mesh fields)). The fields are the ones this release's
              DeviceMesh.__hash__ reads, with hash() replaced by repr:
                2.6 - 2.9:  mesh.mesh.tolist() (ranks in the mesh's shape),
                2.10, 2.11: _flatten_rank_map, _layout.shape, _layout.stride,
              then in both cases device_type, mesh_dim_names and _thread_id. 2.15 also has
              _preserve_rank_order, which is included where the attribute exists.
  spec_hash = blake2b(repr((mesh_hash, placements, shard_order [2.10+],
                            shape, stride, dtype)))   (no shape etc. without tensor_meta)
  key       = blake2b(spec_hash + str(requires_grad) + str(local device)
                      + repr((local shape, local stride)))
The last term goes beyond 2.15. The compiled graph is specialised to the local
shard's shape, which can differ between ranks that share a spec (uneven
Shard). So the key includes it, and those ranks cannot share an entry. On CPU,
where every rank's device is "cpu", the key would not separate them otherwise.
If any repr carries an address (" at 0x", e.g. a user
Placement without __repr__), the DTensor is left to stock pickling (a bypass,
as today) rather than keyed by something process-dependent.

Not included: 2.15's generic path for other tensor subclasses
(`_stable_hash_for_caching` when a subclass defines it, else a default hash of
`__tensor_flatten__` metadata with a warn_once). On 2.6 - 2.11 no torch
subclass defines `_stable_hash_for_caching`, the default hash brings a new
warning, and upstream is still fixing its stability (#190080, #193418). Those
subclasses keep stock behaviour.
"""

from __future__ import annotations

import hashlib
import inspect
import pickle
import sys
from types import ModuleType
from typing import Any, Optional

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "aot-autograd-cache-dtensor-key"


def _blake2b(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _mesh_fields(mesh: Any) -> tuple:
    """What this release's DeviceMesh.__hash__ reads, as plain values."""
    rank_map = getattr(mesh, "_flatten_rank_map", None)
    layout = getattr(mesh, "_layout", None)
    if rank_map is not None and layout is not None:  # 2.10+: root ranks + layout
        ranks: tuple = ("rank_map", tuple(rank_map), layout.shape, layout.stride)
    else:  # 2.6 - 2.9: the mesh tensor is this mesh's own rank layout
        ranks = ("mesh", mesh.mesh.tolist())
    return ranks + (
        mesh.device_type,
        mesh.mesh_dim_names,
        getattr(mesh, "_thread_id", None),
        getattr(mesh, "_preserve_rank_order", None),
    )


def dtensor_cache_key(dtensor: Any) -> Optional[str]:
    """A process-independent key for a DTensor (PR 173526 + PR 188401), or
    None when a field's repr is not a plain value."""
    spec = dtensor._spec
    mesh_text = repr(_mesh_fields(spec.mesh))
    spec_fields: tuple = (tuple(spec.placements), getattr(spec, "shard_order", None))
    meta = spec.tensor_meta
    if meta is not None:
        spec_fields += (tuple(meta.shape), tuple(meta.stride), meta.dtype)
    spec_text = repr((_blake2b(mesh_text),) + spec_fields)
    local = dtensor._local_tensor
    local_text = repr((tuple(local.shape), tuple(local.stride())))
    if any(" at 0x" in text for text in (mesh_text, spec_text, local_text)):
        return None
    return _blake2b(_blake2b(spec_text) + str(dtensor.requires_grad) + str(local.device)
                    + local_text)


def _check_shape(autograd_cache: ModuleType) -> "tuple[type, Any]":
    pickler = getattr(autograd_cache, "AOTAutogradCachePickler", None)
    if not (isinstance(pickler, type) and issubclass(pickler, pickle.Pickler)):
        raise _patching.Unrecognised("AOTAutogradCachePickler is not a pickle.Pickler subclass")
    own = vars(pickler).get("reducer_override")
    if own is not None:
        if getattr(own, _patching._MARK, False):
            raise RuntimeError("AOTAutogradCachePickler.reducer_override is already patched")
        raise _patching.CarriesFix("AOTAutogradCachePickler defines reducer_override "
                                   "(PR 173526, as in torch 2.12.0 - 2.15.0)")
    try:
        init = inspect.getsource(pickler.__init__)
    except (OSError, TypeError) as exc:
        raise _patching.Unrecognised("AOTAutogradCachePickler.__init__: %s" % exc) from None
    # DTensor falls through only because dispatch_table matches torch.Tensor exactly.
    if "self.dispatch_table.update" not in init or "torch.Tensor:" not in init:
        raise _patching.Unrecognised("AOTAutogradCachePickler.__init__ does not fill a "
                                     "dispatch_table with torch.Tensor")
    ident = getattr(autograd_cache, "_ident", None)
    if not callable(ident) or ident(pickler) is not pickler:
        raise _patching.Unrecognised("autograd_cache._ident is not the identity")
    return pickler, ident


def apply(autograd_cache: ModuleType, release: Release) -> Revert:
    """Add AOTAutogradCachePickler.reducer_override; return the undo."""
    pickler, ident = _check_shape(autograd_cache)

    def reducer_override(self: Any, obj: Any) -> Any:
        # Lazily: if torch.distributed.tensor is not imported, nothing is a DTensor.
        dtensor_module = sys.modules.get("torch.distributed.tensor")
        dtensor_type = getattr(dtensor_module, "DTensor", None)
        if dtensor_type is not None and isinstance(obj, dtensor_type):
            key = dtensor_cache_key(obj)
            if key is not None:
                return (ident, (key,))
        parent = getattr(super(pickler, self), "reducer_override", None)
        if parent is not None:  # a later backport's FxGraphCachePickler.reducer_override
            return parent(obj)
        return NotImplemented

    reducer_override.__qualname__ = pickler.__qualname__ + ".reducer_override"
    reducer_override.__module__ = __name__
    setattr(reducer_override, _patching._MARK, True)
    pickler.reducer_override = reducer_override

    def revert() -> None:
        if vars(pickler).get("reducer_override") is reducer_override:
            del pickler.reducer_override

    return revert


# Compiles a flattened-mesh DTensor program in two fresh processes sharing one
# cache dir; the second must hit the AOTAutograd cache and nobody may warn
# "Failed to pickle cache key". `a @ a.t()` lowers to an extern mm, so inductor
# generates no C++ kernel and no compiler is needed. One rank, gloo, HashStore:
# no torchrun.
REPRODUCER = r'''
import os, subprocess, sys, tempfile
CHILD = r"""
import logging, sys, torch, torch.distributed as dist
from torch._dynamo.utils import counters
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate
reasons = []
class Keep(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("Bypassing autograd cache"):
            reasons.append(record.getMessage().splitlines()[0])
log = logging.getLogger("torch._functorch._aot_autograd.autograd_cache")
log.setLevel(logging.INFO)
log.addHandler(Keep())
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("world",))
flat = mesh["world"]._flatten(mesh_dim_name="dp")
a = DTensor.from_local(torch.arange(12.0).reshape(3, 4), flat, [Replicate()])
out = torch.compile(lambda t: t @ t.t())(a)
assert torch.equal(out.to_local(), a.to_local() @ a.to_local().t())
dist.destroy_process_group()
print("hits=%d" % counters["aot_autograd"]["autograd_cache_hit"])
print("reason=%s" % (reasons[0] if reasons else ""))
# Past gloo's C++ teardown, which can abort a run that passed ("terminate
# called without an active exception").
import os
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""
try:
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_gloo_available()):
        raise ImportError("gloo")
except ImportError:
    print("skipped: needs torch.distributed with gloo")
    sys.exit(77)
import torch
if tuple(int(p) for p in torch.__version__.split(".")[:2]) == (2, 12):
    # 2.12 keys the DTensor (PR 173526), but its FX graph cache key now
    # meets the DeviceMesh and refuses its cycle; pytorch#180422 fixed that
    # in 2.13 and is not backported, so this program cannot hit there.
    print("skipped: torch 2.12 bypasses the FX graph cache for a flattened DeviceMesh "
          "(pytorch#180422, fixed in 2.13, not backported)")
    sys.exit(77)
with tempfile.TemporaryDirectory() as cache:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TORCHINDUCTOR_FX_GRAPH_CACHE="1",
               TORCHINDUCTOR_AUTOGRAD_CACHE="1")
    runs = [subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                           text=True, timeout=600) for _ in range(2)]
for run in runs:
    sys.stderr.write(run.stderr)
    assert run.returncode == 0, "child failed"
info = dict(line.split("=", 1) for line in runs[1].stdout.splitlines() if "=" in line)
if int(info["hits"]) < 1:
    raise AssertionError("AOTAutograd cache missed in the second process. " + info["reason"])
for run in runs:
    assert "Failed to pickle cache key" not in run.stderr, "a child logged Failed to pickle cache key"
'''

BACKPORT = Backport(
    name=NAME,
    summary="a compiled program with a DTensor input gets a stable AOTAutograd cache key "
    "(a hash of the DTensor's spec, never a pickled DeviceMesh), so a second process hits "
    "the AOTAutograd cache",
    headline="a DTensor input never hits the AOTAutograd cache in a second process",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/173526",
        "https://github.com/pytorch/pytorch/pull/188401",
        "https://github.com/pytorch/pytorch/issues/179597",
    ),
    first_affected=(2, 6, 0),
    first_fixed=(2, 12, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="AOTAutograd cache missed in the second process",
    readme_symptom=(
        "a compiled program with a DTensor input never hits the AOTAutograd cache in a "
        "second process: the key pickles the DeviceMesh, which a flattened mesh makes "
        'cyclic (2.10 – 2.11: bypass; 2.11 also warns "Failed to pickle cache key") or '
        "whose cached hash differs per process (2.6 – 2.9: a miss and a new entry every "
        "time)"
    ),
    readme_fix=(
        "gives `AOTAutogradCachePickler` the `reducer_override` of 2.12+ for DTensors "
        "only: a DTensor is keyed by a hash of plain values (the mesh's ranks, layout, "
        "device type and dim names; placements; global shape, stride and dtype; "
        "`requires_grad`; the local shard's device, as 2.15 does, and its shape and "
        "stride), never by pickling its DeviceMesh. Other tensor subclasses keep stock "
        "behaviour. Tested with one and two torchrun ranks: the second process hits, and "
        "ten DTensors that differ in one key object give ten keys. On 2.12.x the DTensor "
        "is keyed upstream, but the FX graph cache key refuses the flattened mesh's cycle "
        "until 2.13 ([pytorch#180422], not backported), so that program still misses "
        "there; its reproducer skips."
    ),
)
