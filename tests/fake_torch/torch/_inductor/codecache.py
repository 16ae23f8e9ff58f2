"""Fake torch._inductor.codecache, imitating 2.9.1, 2.10.0 and 2.11.0.

The three `dumps` bodies below follow, release by release, what each real
wheel's torch/_inductor/codecache.py catches in FxGraphCachePickler.dumps:
  2.9.1:  TypeError, AttributeError
  2.10.0: TypeError, AttributeError, pickle.PicklingError
  2.11.0: those and ValueError, plus RuntimeError naming pybind11
As in the real class, the pickler is a pickle.Pickler writing to its own
BytesIO with fast = True, and dumps resets that stream in `finally`.
FAKE_TORCH_FAULT removes or changes a piece, for fault-injection tests.
"""

import io
import logging
import os
import pickle

log = logging.getLogger(__name__)
_fault = os.environ.get("FAKE_TORCH_FAULT", "")
if _fault == "no-codecache":
    raise ModuleNotFoundError("No module named 'torch._inductor.codecache'")
# Read from the environment like the fake torch/__init__.py, so that unit
# tests can load this file on its own for any release.
_release = tuple(int(p) for p in os.environ.get("FAKE_TORCH_VERSION", "2.10.0").split(".")[:2])


class BypassFxGraphCache(Exception):
    """Raised by the real codecache to skip the cache for one graph."""


class FxGraphCachePickler(pickle.Pickler):
    """Pickles the details of a graph to compute its cache key."""

    def __init__(self):
        self._stream = io.BytesIO()
        super().__init__(self._stream)
        self.fast = True

    if _release <= (2, 9):  # 2.9.1
        def dumps(self, obj):
            """Pickle an object and return a byte string."""
            try:
                self.dump(obj)
                return self._stream.getvalue()
            except (TypeError, AttributeError) as e:
                log.warning("Failed to pickle cache key", exc_info=True)
                raise BypassFxGraphCache("Failed to pickle cache key") from e
            finally:
                self._stream.seek(0)
                self._stream.truncate(0)

    elif _release == (2, 10):  # 2.10.0
        def dumps(self, obj):
            """Pickle an object and return a byte string."""
            try:
                self.dump(obj)
                return self._stream.getvalue()
            except (TypeError, AttributeError, pickle.PicklingError) as e:
                log.warning("Failed to pickle cache key", exc_info=True)
                raise BypassFxGraphCache("Failed to pickle cache key") from e
            finally:
                self._stream.seek(0)
                self._stream.truncate(0)

    else:  # 2.11.0
        def dumps(self, obj):
            """Pickle an object and return a byte string."""
            try:
                self.dump(obj)
                return self._stream.getvalue()
            except (TypeError, AttributeError, pickle.PicklingError, ValueError) as e:
                log.warning("Failed to pickle cache key", exc_info=True)
                raise BypassFxGraphCache("Failed to pickle cache key") from e
            except RuntimeError as e:
                if "pybind11" in str(e) and "is not pickleable" in str(e):
                    log.warning("Failed to pickle cache key", exc_info=True)
                    raise BypassFxGraphCache("Failed to pickle cache key") from e
                raise
            finally:
                self._stream.seek(0)
                self._stream.truncate(0)

    def get_hash(self, obj):
        return self.dumps(obj).hex()


if _fault == "no-pickler":
    del FxGraphCachePickler
elif _fault == "no-bypass":
    del BypassFxGraphCache
elif _fault == "no-dumps":
    del FxGraphCachePickler.dumps
elif _fault == "dumps-not-function":
    FxGraphCachePickler.dumps = classmethod(FxGraphCachePickler.dumps)
elif _fault == "dumps-signature":
    _shipped = FxGraphCachePickler.dumps
    FxGraphCachePickler.dumps = lambda self, obj, protocol=None: _shipped(self, obj)


if _fault == "stale-holder":
    # As torch's kernel/conv.py does with lowering's functions: a module
    # imported while this one is still being imported binds what this one
    # holds then, before any post-import hook has run.
    from . import _stale_holder  # noqa: F401
