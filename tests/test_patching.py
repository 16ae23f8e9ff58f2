"""Fingerprints, source edits and restore points, on small made-up modules
(no torch): what every fingerprint-pinned backport relies on."""

import sys
import types
import textwrap

import pytest

from torch_backports import _activate, _fingerprint, _patching, _records, _registry
from torch_backports._backport import Backport

SOURCE = '''
class Base:
    def describe(self, x):
        return "base %s" % x


class Kernel(Base):
    LIMIT = 3

    def describe(self, x):
        """Say what x is."""
        text = super().describe(x)
        return text + " (scalar)"


def helper(a, b=2):
    return a + b


def long_signature(
    a,
    b=2,
) -> int:
    total = a + b
    # a comment at the end of the body

    return total
    # a trailing comment, not part of the block


def column_zero_string():
    text = """first
second line at column 0"""
    return text


def column_zero_tail():
    return """first
second line at column 0"""
'''


@pytest.fixture
def module(tmp_path, monkeypatch):
    """A real module from a real file, so inspect can read its source."""
    path = tmp_path / "made_up_target.py"
    path.write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("made_up_target", None)
    import made_up_target

    yield made_up_target
    sys.modules.pop("made_up_target", None)


def test_fingerprint_of_a_live_function_matches_the_file(module):
    live = _fingerprint.of_function(module.Kernel.describe)
    assert live == _fingerprint.of_file(SOURCE, "Kernel.describe")
    assert live != _fingerprint.of_file(SOURCE, "Base.describe")
    assert _fingerprint.of_file(SOURCE, "helper") == _fingerprint.of_function(module.helper)


@pytest.mark.parametrize("qualname", ["helper", "Kernel.describe", "long_signature",
                                      "column_zero_string", "column_zero_tail"])
def test_the_cheap_block_cut_agrees_with_inspect_or_defers_to_it(module, qualname):
    """source_of() cuts a function's block by indentation, and keeps that
    cut only where its fingerprint is a known one."""
    import inspect

    function = module
    for part in qualname.split("."):
        function = getattr(function, part)
    exact = _fingerprint.of_source(inspect.getsource(function))
    assert exact == _fingerprint.of_file(SOURCE, qualname)
    block = _fingerprint._indented_block(function.__code__)
    cut_right = _fingerprint.of_source(block) == exact
    # A line at column 0 fools the cut where it comes after the last line
    # the code object names; before it, only where there is no co_lines().
    fooled = {"column_zero_tail"} | ({"column_zero_string"} if sys.version_info < (3, 10)
                                     else set())
    assert cut_right is (qualname not in fooled)
    _fingerprint._seen.clear()
    assert _fingerprint.of_function(function, known={exact}) == exact
    _fingerprint._seen.clear()
    assert _fingerprint.of_function(function) == exact  # nothing known: inspect decides


def test_rewritten_without_ast_keeps_line_numbers(module):
    fingerprint = _fingerprint.of_function(module.long_signature)
    new = _patching.rewritten(module.long_signature, [("    total = a + b\n",
                                                        "    total = a * b\n")],
                              {fingerprint: "test"}, {})
    assert new(3) == 6 and module.long_signature(3) == 5
    assert new.__code__.co_firstlineno == module.long_signature.__code__.co_firstlineno
    assert new.__code__.co_filename == module.long_signature.__code__.co_filename


def test_fingerprint_ignores_indentation_and_trailing_blanks():
    source = "def f():\n    return 1\n"
    assert _fingerprint.of_source(textwrap.indent(source, "    ")) == _fingerprint.of_source(source)
    assert _fingerprint.of_source("def f():  \n    return 1\n") == _fingerprint.of_source(source)
    assert _fingerprint.of_source("def f():\n    return 2\n") != _fingerprint.of_source(source)


def test_rewritten_edits_the_installed_source_and_keeps_super(module):
    verified = {_fingerprint.of_function(module.Kernel.describe): "made-up 1.0"}
    new = _patching.rewritten(module.Kernel.describe, [('" (scalar)"', '" (vector)"')],
                              verified, {})
    assert new(module.Kernel(), 1) == "base 1 (vector)"
    assert new.__qualname__ == "Kernel.describe" and new.__doc__ == "Say what x is."
    assert new.__code__.co_filename == module.__file__
    assert new.__code__.co_firstlineno == module.Kernel.describe.__code__.co_firstlineno


def test_rewritten_keeps_defaults(module):
    verified = {_fingerprint.of_function(module.helper): "made-up 1.0"}
    new = _patching.rewritten(module.helper, [("a + b", "a * b")], verified, {})
    assert new(5) == 10


@pytest.mark.parametrize("edit", [("not in the source", "x"), ("text", "words")])
def test_an_edit_must_match_exactly_once(module, edit):
    verified = {_fingerprint.of_function(module.Kernel.describe): "made-up 1.0"}
    with pytest.raises(_patching.Unrecognised, match="not once"):
        _patching.rewritten(module.Kernel.describe, [edit], verified, {})


def test_unknown_fingerprint_is_unrecognised(module):
    before = vars(module.Kernel)["describe"]
    with pytest.raises(_patching.Unrecognised, match="matches no verified release"):
        _patching.replace_attribute(module.Kernel, "describe", lambda self, x: x,
                                    {"0123456789abcdef": "made-up 1.0"}, {})
    assert vars(module.Kernel)["describe"] is before


def test_fixed_fingerprint_is_reported_as_carrying_the_fix(module):
    fixed = {_fingerprint.of_function(module.Kernel.describe): "made-up 2.0"}
    with pytest.raises(_patching.CarriesFix, match="made-up 2.0"):
        _patching.replace_attribute(module.Kernel, "describe", None, {}, fixed)


def test_missing_attribute_and_missing_source_are_unrecognised(module):
    with pytest.raises(_patching.Unrecognised, match="does not exist"):
        _patching.replace_attribute(module.Kernel, "nope", None, {}, {})
    namespace = {}
    # A file name no other code uses: linecache may hold lines for "<string>"
    # from whatever ran before in this process (Python 3.13 under xdist).
    exec(compile("def no_file():\n    return 1\n", "<no file: test_patching>", "exec"),
         namespace)
    owner = types.SimpleNamespace(no_file=namespace["no_file"])
    with pytest.raises(_patching.Unrecognised, match="source cannot be read"):
        _patching.replace_attribute(owner, "no_file", None, {"x": "y"}, {})


def test_restore_point_undoes_sets_replacements_and_deletions(module):
    shipped_module, shipped_class = dict(vars(module)), dict(vars(module.Kernel))
    restore = _patching.snapshot(module)
    module.Kernel.describe = lambda self, x: "patched"
    module.Kernel.extra = 1
    del module.Kernel.LIMIT
    module.helper = None
    module.new_global = 2
    restore()
    assert dict(vars(module)) == shipped_module
    assert dict(vars(module.Kernel)) == shipped_class


def half_way(module, release):
    """A patch that raises after changing its target (a bug of ours)."""
    module.Kernel.describe = lambda self, x: "half"
    module.helper = None
    raise RuntimeError("our patch broke halfway")


@pytest.mark.parametrize("raises, state", [
    (half_way, "failed"),
    (lambda m, r: (setattr(m, "helper", None), _raise(_patching.Unrecognised("changed")))[0],
     "unrecognised"),
    (lambda m, r: (setattr(m, "helper", None), _raise(_patching.CarriesFix("has it")))[0],
     "not needed"),
])
def test_a_patch_that_raises_leaves_the_target_as_shipped(module, monkeypatch, raises, state):
    backport = Backport(name="made-up", summary="", upstream=(), first_affected=(2, 0, 0),
                        first_fixed=(9, 0, 0), apply=raises, reproducer="pass", symptom="x")
    monkeypatch.setattr(_registry, "BACKPORTS", _registry.BACKPORTS
                        + (("made-up", module.__name__, (2, 0, 0), (9, 0, 0)),))
    monkeypatch.setattr(_registry, "load", lambda name: backport)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.10.0"))
    monkeypatch.delenv("TORCH_BACKPORTS_DISABLE", raising=False)
    shipped_module, shipped_class = dict(vars(module)), dict(vars(module.Kernel))
    hook = _activate._hook_for("made-up")
    hook(module)  # as wrapt calls it: it must never raise
    assert dict(vars(module)) == shipped_module
    assert dict(vars(module.Kernel)) == shipped_class
    assert _records.get("made-up")[0] == state


def _raise(error):
    raise error


def test_a_replacement_is_never_replaced_again(module):
    verified = {_fingerprint.of_function(module.Kernel.describe): "made-up 1.0"}
    new = _patching.rewritten(module.Kernel.describe, [('" (scalar)"', '" (vector)"')],
                              verified, {})
    _patching.replace_attribute(module.Kernel, "describe", new, verified, {})
    with pytest.raises(RuntimeError, match="already patched"):
        _patching.replace_attribute(module.Kernel, "describe", lambda self, x: x, verified, {})
    assert vars(module.Kernel)["describe"] is new


def test_rewritten_on_first_call_checks_and_compiles_at_the_first_call(module):
    kernel = module.Kernel
    original = vars(kernel)["describe"]
    fingerprint = _fingerprint.of_function(original)
    edits = [('    return text + " (scalar)"\n', '    return text + " (fixed)"\n')]
    _fingerprint._seen.clear()
    revert = _patching.rewritten_on_first_call(kernel, "describe", edits, {fingerprint: "t"}, {})
    assert original.__code__ not in _fingerprint._seen  # nothing read yet
    stand_in = vars(kernel)["describe"]
    assert stand_in is not original and stand_in.__wrapped__ is original
    assert kernel().describe(1) == "base 1 (fixed)"  # super() still finds Base
    compiled = vars(kernel)["describe"]
    assert compiled is not stand_in and kernel().describe(2) == "base 2 (fixed)"
    _patching.check_put_off(revert)  # passed already: nothing to raise
    revert()
    assert vars(kernel)["describe"] is original


@pytest.mark.parametrize("verified, fixed, refusal", [
    ({"0" * 16: "t"}, {}, _patching.Unrecognised),
    ({"0" * 16: "t"}, "the original's", _patching.CarriesFix),
])
def test_a_check_put_off_that_refuses_puts_the_original_back(module, verified, fixed, refusal):
    original = vars(module)["helper"]
    if fixed:
        fixed = {_fingerprint.of_function(original): "t+1"}
    edits = [("    return a + b\n", "    return a * b\n")]
    revert = _patching.rewritten_on_first_call(module, "helper", edits, verified, fixed)
    assert module.helper is not original
    assert module.helper(3) == 5  # the original runs, unedited
    assert module.helper is original
    with pytest.raises(refusal):
        _patching.check_put_off(revert)
    # asked before any call, the check puts the original back at once
    revert = _patching.rewritten_on_first_call(module, "helper", edits, verified, fixed)
    stand_in = module.helper
    with pytest.raises(refusal):
        _patching.check_put_off(revert)
    assert module.helper is original and stand_in(3) == 5


def test_a_patch_of_several_parts_runs_their_put_off_checks(module):
    # fx-wrap-frame-cycle's shape: a stand-in, and the stand-in rebound in
    # another module; over fixed code (2.15.0's, reporting 2.15.0rc1) the
    # whole patch must be refused, not read "applied".
    original = vars(module)["helper"]
    fixed = {_fingerprint.of_function(original): "t+1"}
    stand_in_undo = _patching.rewritten_on_first_call(
        module, "helper", [("    return a + b\n", "    return a * b\n")], {"0" * 16: "t"}, fixed)
    revert = _patching.undo_all([_patching.undo_all([]), stand_in_undo])
    with pytest.raises(_patching.CarriesFix):
        _patching.check_put_off(revert)
    assert module.helper is original
    _patching.check_put_off(_patching.undo_all([]))  # nothing put off: nothing to raise


def test_a_partner_check_that_refuses_puts_both_back(module):
    helper, describe = vars(module)["helper"], vars(module.Kernel)["describe"]
    refuse = [False]

    def partner():
        if refuse[0]:
            raise _patching.Unrecognised("the partner changed")

    undo_helper = _patching.rewritten_on_first_call(
        module, "helper", [("    return a + b\n", "    return a * b\n")],
        {_fingerprint.of_function(helper): "t"}, {}, partner=partner)
    undo_describe = _patching.rewritten_on_first_call(
        module.Kernel, "describe", [('" (scalar)"', '" (fixed)"')],
        {_fingerprint.of_function(describe): "t"}, {}, partner=partner)
    refuse[0] = True
    assert module.helper(3) == 5 and module.helper is helper
    assert module.Kernel().describe(1) == "base 1 (scalar)"
    assert vars(module.Kernel)["describe"] is describe
    for undo in (undo_helper, undo_describe):
        with pytest.raises(_patching.Unrecognised, match="partner"):
            _patching.check_put_off(undo)


def test_edits_by_fingerprint_are_chosen_at_the_first_call(module):
    original = vars(module)["helper"]
    fingerprint = _fingerprint.of_function(original)
    edits = {"1" * 16: [("    return a + b\n", "    return a - b\n")],
             fingerprint: [("    return a + b\n", "    return a * b\n")]}
    revert = _patching.rewritten_on_first_call(module, "helper", edits,
                                               {fingerprint: "t", "1" * 16: "u"}, {})
    assert module.helper(3) == 6
    revert()
    assert module.helper is original


def test_status_runs_the_checks_put_off_and_records_a_refusal(module, monkeypatch):
    """A check put off until the first call is run when status is asked: a
    report never shows "applied" over code the check refuses."""
    import torch_backports

    original = vars(module)["helper"]
    backport = Backport(
        name="made-up", summary="", upstream=(), first_affected=(2, 0, 0), first_fixed=(9, 0, 0),
        apply=lambda m, r: _patching.rewritten_on_first_call(
            m, "helper", [("    return a + b\n", "    return a * b\n")], {"0" * 16: "t"}, {}),
        reproducer="pass", symptom="x")
    monkeypatch.setattr(_registry, "BACKPORTS", (("made-up", module.__name__, (2, 0, 0),
                                                  (9, 0, 0)),))
    monkeypatch.setattr(_registry, "load", lambda name: backport)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.10.0"))
    monkeypatch.delenv("TORCH_BACKPORTS_DISABLE", raising=False)
    _activate._reverts.pop("made-up", None)
    assert _activate.apply("made-up", module) == "applied"
    assert module.helper is not original
    records = {r["name"]: r for r in torch_backports.status()}
    assert records["made-up"]["state"] == "unrecognised"
    assert "matches no verified release" in records["made-up"]["reason"]
    assert module.helper is original and "made-up" not in _activate._reverts


def test_rewritten_on_first_call_reverts_before_the_first_call(module):
    original = vars(module)["helper"]
    fingerprint = _fingerprint.of_function(original)
    revert = _patching.rewritten_on_first_call(
        module, "helper", [("    return a + b\n", "    return a * b\n")], {fingerprint: "t"}, {})
    assert module.helper is not original
    revert()
    assert module.helper is original and module.helper(3) == 5


def test_rewritten_on_first_call_with_when_sends_only_those_calls_to_the_copy(module):
    original = vars(module)["helper"]
    fingerprint = _fingerprint.of_function(original)
    revert = _patching.rewritten_on_first_call(
        module, "helper", [("    return a + b\n", "    return a * b\n")], {fingerprint: "t"}, {},
        when=lambda a, b=2: a < 0)
    stand_in = module.helper
    assert module.helper(3) == 5  # the original's answer: not a call the fix concerns
    assert module.helper(-3) == -6  # the copy's
    assert module.helper is stand_in and module.helper(4) == 6
    revert()
    assert module.helper is original


def test_rewritten_on_first_call_with_through_makes_every_call_through_it(module):
    original = vars(module)["helper"]
    fingerprint = _fingerprint.of_function(original)
    calls = []

    def through(function, args, kwargs):
        calls.append((function, args, kwargs))
        return function(*args, **kwargs)

    revert = _patching.rewritten_on_first_call(
        module, "helper", [("    return a + b\n", "    return a * b\n")], {fingerprint: "t"}, {},
        through=through)
    stand_in = module.helper
    assert getattr(stand_in, _patching.CALLED_THROUGH) is through
    assert stand_in(3, b=4) == 12  # the copy, called by `through`
    assert calls[0][0] is module.helper and calls[0][1:] == ((3,), {"b": 4})
    assert module.helper is not stand_in and module.helper(3) == 6  # the copy from now on
    assert stand_in(5) == 10 and len(calls) == 2  # a name still bound to the stand-in
    revert()
    assert module.helper is original


def test_own_class_is_read_from_the_module_namespace(module):
    assert _patching.own_class(module, "Kernel") is module.Kernel
    for name in ("helper", "Missing"):  # a function; nothing at all
        with pytest.raises(_patching.Unrecognised, match="has no class %s" % name):
            _patching.own_class(module, name)


def test_rebind_sets_only_modules_holding_the_original_and_undoes_only_its_own(monkeypatch):
    import sys
    import types

    def original():
        pass

    def new():
        pass

    holder, other = types.ModuleType("tb_holder"), types.ModuleType("tb_other")
    holder.f, other.f = original, "something else"
    monkeypatch.setitem(sys.modules, "tb_holder", holder)
    monkeypatch.setitem(sys.modules, "tb_other", other)
    undo = _patching.rebind(("tb_holder", "tb_other", "tb_not_loaded"), "f", original, new)
    assert holder.f is new and other.f == "something else"
    undo()
    assert holder.f is original
    undo_again = _patching.rebind(("tb_holder",), "f", original, new)
    holder.f = "replaced since"
    undo_again()
    assert holder.f == "replaced since"


def test_recorded_later_records_a_later_change_with_the_patch_that_took_it():
    import types

    owner = types.SimpleNamespace(f=1)
    during_apply: list = []
    outer = _patching.recording(during_apply)
    try:
        later = _patching.recorded_later()
    finally:
        _patching.recording(outer)
    elsewhere: list = []
    outer = _patching.recording(elsewhere)  # another backport being applied
    try:
        undo = later(lambda: _patching._install(owner, "f", 1, 2, _patching.REPLACED))
    finally:
        _patching.recording(outer)
    assert owner.f == 2 and elsewhere == []
    assert during_apply == [(owner, "f", 1, 2, _patching.REPLACED)]
    assert _patching._recording is None
    undo()
    assert owner.f == 1


def test_rebind_defaults_sets_only_defaults_holding_the_original_records_and_undoes_them():
    from torch_backports import _diff

    def original():
        pass

    def new():
        pass

    def positional(x, compile=original, other=None):
        return compile

    def keyword(x, *, compile=original, other=original):
        return compile, other

    def neither(x, compile=print):
        return compile

    changes: list = []
    before = _patching.recording(changes)
    try:
        undo = _patching.rebind_defaults((positional, keyword, neither), original, new)
    finally:
        _patching.recording(before)
    assert positional(1) is new and keyword(1) == (new, new) and neither(1) is print
    assert positional.__defaults__ == (new, None)
    targets = sorted(_diff.qualified_name(owner, name) for owner, name, old, set_, _ in changes)
    assert targets == [
        "%s.%s(%s)" % (__name__, function.__qualname__, parameter)
        for function, parameter in ((keyword, "compile="), (keyword, "other="),
                                    (positional, "compile="))]
    assert all(old is original and set_ is new for _, _, old, set_, _ in changes)
    keyword.__kwdefaults__ = {**keyword.__kwdefaults__, "other": "replaced since"}
    undo()
    assert positional(1) is original and keyword(1) == (original, "replaced since")


def test_all_or_nothing_undoes_the_changes_made_when_one_raises_last_first():
    owner = types.SimpleNamespace(a=1, b=2)
    order = []

    def change(name, value):
        old = getattr(owner, name)
        setattr(owner, name, value)

        def undo():
            order.append(name)
            setattr(owner, name, old)
        return undo

    with pytest.raises(KeyError):
        with _patching.all_or_nothing() as reverts:
            reverts.append(change("a", 10))
            reverts.append(change("b", 20))
            raise KeyError("halfway")
    assert (owner.a, owner.b) == (1, 2) and order == ["b", "a"]

    with _patching.all_or_nothing() as reverts:
        reverts.append(change("a", 10))
    assert owner.a == 10
    _patching.undo_all(reverts)()
    assert owner.a == 1
