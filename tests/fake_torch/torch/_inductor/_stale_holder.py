"""Imported by the fake codecache under FAKE_TORCH_FAULT=stale-holder: it
binds the shipped FxGraphCachePickler.dumps under its own name, as a
`from codecache import ...` made before the patch would."""

from .codecache import FxGraphCachePickler

dumps = FxGraphCachePickler.__dict__["dumps"]
