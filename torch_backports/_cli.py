"""`torch-backports status | check | verify | diff`, also `python -m torch_backports`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

import torch_backports

from . import _config, _diff, _environment, _probe, _records, _registry, _versions

# States that leave a needed backport inactive in a new process.
_INACTIVE = (_records.PENDING, _records.DISABLED, _records.UNRECOGNISED, _records.FAILED)


def gather(probe: bool = True) -> dict:
    """Everything `status` shows, as one JSON-ready dict."""
    version = _environment.torch_version()
    report = {
        "torch_backports": torch_backports.__version__,
        "package": _environment.package_location(),
        "python": _environment.interpreter(),
        "torch": version,
        "startup": {
            "files": _environment.startup_files(),
            "this_interpreter": torch_backports._startup_state,
            "error": torch_backports._startup_error,
        },
        "new_process": None,
        "backports": [],
    }
    targets = list(dict.fromkeys(_registry.target(name) for name in _registry.names()))
    result = _probe.probe_new_process(targets) if (probe and version) else None
    if result is not None:
        # The child's torch.__version__ beats metadata, which a source tree lacks.
        version = report["torch"] = result.torch_version or version
        report["new_process"] = {
            "ok": result.ok,
            "failure": result.failure,
            "import_error": result.import_error,
            "startup_state": result.startup_state,
            "startup_error": result.startup_error,
            # The stale-reference audit's own failure, if it failed.
            "notes": result.notes + result.stale.get("", []),
        }
    by_name = {r["name"]: r for r in (result.records if result and result.ok else [])}
    for record in _records.snapshot():
        row = by_name.get(record["name"]) or record
        if version is None:
            row = dict(row, reason="torch is not installed in this environment")
        elif result is None:
            row = dict(row, reason="not probed (--no-probe)")
        elif not result.ok:
            row = dict(row, state=_records.FAILED, reason=result.failure)
        row["torch"] = row.get("torch") or version
        # Each target the applied backport changed and the hashes of the
        # installed and the running code, for an audit (docs/diff.md).
        row["patches"] = _diff.hashes(result.changes.get(record["name"], [])) if (
            result is not None and result.ok and row["state"] == _records.APPLIED) else []
        # Loaded modules that still hold what it replaced (_stale): a defect.
        row["stale"] = result.stale.get(record["name"], []) if (
            result is not None and result.ok) else []
        if row["stale"]:
            row = dict(row, reason="%s; but %s" % (row["reason"], _still_held(row["stale"])))
        report["backports"].append(row)
    return report


def _still_held(stale: List[str]) -> str:
    """'<module.attr>, ... still hold(s) the code it replaced'."""
    return "%s still hold%s the code it replaced" % (", ".join(stale),
                                                     "s" if len(stale) == 1 else "")


def problems(report: dict) -> List[str]:
    """Why a backport this torch needs would not be active in a new process."""
    if report["torch"] is None:
        return []
    try:
        release = _versions.release_of(report["torch"])
    except _versions.UnknownRelease as exc:
        return ["cannot judge torch %r: %s" % (report["torch"], exc)]
    found = []
    new = report["new_process"] or {}
    for row in report["backports"]:
        if row.get("stale"):
            found.append("%s is applied, but %s, whose callers then miss the fix"
                         % (row["name"], _still_held(row["stale"])))
        if not _registry.load(row["name"]).needed_by(release) or row["state"] not in _INACTIVE:
            continue
        reason = row["reason"]
        if row["state"] == _records.PENDING:
            reason = "the startup hook did not arm in a new process (state %r%s)" % (
                new.get("startup_state"),
                "; no torch_backports.pth in a site directory" if not report["startup"]["files"] else "",
            )
        found.append("%s is needed by torch %s but %s: %s" % (row["name"], report["torch"], row["state"], reason))
    return found


def _counts(report: dict) -> str:
    states = [row["state"] for row in report["backports"]]
    return ", ".join("%d %s" % (states.count(state), state)
                     for state in _records.STATES if state in states)


def _print_table(report: dict, verbose: bool) -> None:
    """The table first, then what a reader needs to trust it; the long text
    (paths, summaries, links) only with -v."""
    new = report["new_process"] or {}
    lines = ["torch %s, torch-backports %s, Python %s" % (
        report["torch"] or "not installed", report["torch_backports"],
        report["python"].rsplit(" ", 1)[-1]), ""]
    header = ("backport", "affects", "state", "reason")
    rows = [(r["name"], r["affects"], r["state"], r["reason"]) for r in report["backports"]]
    widths = [max(len(str(row[i])) for row in [header] + rows) for i in range(3)]
    for row in [header] + rows:
        lines.append("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)) + "  " + str(row[3]))
    lines.append("")
    if report["torch"] is None:
        lines.append("torch is not installed here, so nothing is patched.")
    elif new:
        lines.append("%s: the states of a new Python process of this environment, which "
                     "status started to import torch's patched modules." % _counts(report))
    if not report["startup"]["files"]:
        lines.append("WARNING: no torch_backports.pth in a site directory, so nothing is "
                     "patched in new processes (see README: Troubleshooting).")
    if new.get("import_error"):
        lines.append("WARNING: importing torch failed in that process: %s" % new["import_error"])
    for note in new.get("notes") or []:
        lines.append("note: %s" % note)
    if verbose:
        startup = report["startup"]
        lines += [
            "",
            "package         %s" % report["package"],
            "python          %s" % report["python"],
            "startup file    %s" % (", ".join(startup["files"]) or "none"),
            "startup state   %s in the new process; %s in this one, which never imports torch"
            % (new.get("startup_state") or new.get("failure") or "not probed",
               startup["this_interpreter"] + (" (%s)" % startup["error"] if startup["error"] else "")),
        ]
        for r in report["backports"]:
            lines.append("")
            lines.append("%s: %s" % (r["name"], r["summary"]))
            lines.extend("  " + link for link in r["upstream"])
    else:
        lines.append("`torch-backports status -v` adds each backport's summary and upstream links.")
    print("\n".join(lines))


def _parser() -> "tuple[argparse.ArgumentParser, dict]":
    parser = argparse.ArgumentParser(
        prog="torch-backports",
        description="Show or check the torch backports of this environment.",
        epilog="Exit statuses: 0 fine; 1 check or verify failed; 2 bad usage; "
        "3 verify checked nothing (every reproducer skipped, or no torch); "
        "141 output pipe closed before all was written.",
    )
    parser.add_argument("--version", action="version",
                        version="torch-backports %s" % torch_backports.__version__)
    commands = parser.add_subparsers(dest="command")
    no_probe = dict(action="store_true",
                    help="do not start a new Python process to import torch; every state then "
                    "reads 'pending' (faster, but shows nothing of the patches)")
    status = commands.add_parser("status", help="show each backport and its state (the default)")
    status.add_argument("-v", "--verbose", action="store_true",
                        help="also paths, startup state, summaries and upstream links")
    status.add_argument("--json", action="store_true", help="print everything as JSON")
    status.add_argument("--no-probe", **no_probe)
    check = commands.add_parser(
        "check", help="exit 1 if a backport this torch needs would not be active in a new process"
    )
    check.add_argument("--json", action="store_true", help="print JSON instead of text")
    verify = commands.add_parser(
        "verify", help="run each needed backport's reproducer, stock and with torch-backports"
    )
    verify.add_argument("names", nargs="*", metavar="NAME",
                        help="backports to verify (default: every one this torch needs)")
    verify.add_argument("--json", action="store_true", help="print JSON instead of a table")
    verify.add_argument("--anyway", action="store_true",
                        help="also run a named backport that this torch does not need (it "
                        "ships the fix, or predates the bug)")
    verify.add_argument("-j", "--jobs", type=_positive, default=None, metavar="N",
                        help="runs at a time (default: one per core)")
    diff = commands.add_parser(
        "diff", help="show exactly what runs instead of the installed torch code"
    )
    diff.add_argument("names", nargs="*", metavar="NAME",
                      help="backports to show (default: every one)")
    diff.add_argument("--json", action="store_true",
                      help="print the changes, with both sources, as JSON")
    return parser, {"status": status, "check": check, "verify": verify, "diff": diff}


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError("expected a whole number of at least 1, got %r" % text)
    return value


def main(argv: Optional[List[str]] = None) -> int:
    parser, subparsers = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # `status` is the default command, options and all: `torch-backports
    # --json` is `torch-backports status --json`.
    if not set(argv) & (set(subparsers) | {"-h", "--help", "--version"}):
        # ... but a word where the command goes is a command misspelt
        # (status takes no words), not an argument of status.
        words = [arg for arg in argv if not arg.startswith("-")]
        if words:
            import difflib

            close = difflib.get_close_matches(words[0], list(subparsers), n=1, cutoff=0.5)
            parser.error("unknown command %r; %s" % (words[0], (
                "did you mean %r?" % close[0] if close
                else "the commands are %s" % ", ".join(subparsers))))
        argv.insert(0, "status")
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the command's own usage, not the top-level one
        (subparsers.get(args.command) or parser).error("unrecognized arguments: %s"
                                                       % " ".join(extra))
    if args.command == "verify":
        return _verify_command(args.names, args.json, args.anyway, args.jobs)
    if args.command == "diff":
        return _diff_command(args.names, args.json)

    report = gather(probe=not getattr(args, "no_probe", False))
    if args.command == "check":
        found = problems(report)
        if args.json:
            print(json.dumps({"ok": not found, "problems": found, "report": report}, indent=2))
        elif found:
            print("torch-backports check FAILED:\n" + "\n".join("  " + p for p in found))
        else:
            print("torch-backports check passed: every backport torch %s needs is active."
                  % report["torch"] if report["torch"] else
                  "torch-backports check passed: torch is not installed, nothing is needed.")
        return 1 if found else 0
    if getattr(args, "json", False):
        print(json.dumps(report, indent=2))
    else:
        _print_table(report, getattr(args, "verbose", False))
    return 0


def _verify_command(names: List[str], as_json: bool, anyway: bool = False,
                    jobs: Optional[int] = None) -> int:
    from . import _verify

    version = _environment.torch_version()
    if version is None:
        message = "torch is not installed in this environment: nothing to verify."
        if as_json:
            print(json.dumps({"torch": None, "ok": False, "checked": 0, "status": "nothing checked",
                              "message": message, "backports": []}, indent=2))
        else:
            print("torch-backports verify: " + message)
        return _verify.NOTHING_CHECKED
    try:
        chosen = _verify.selected(names, version)
    except _verify.UnknownBackport as exc:
        print("torch-backports verify: %s" % exc, file=sys.stderr)
        return 2
    if names:
        # A named backport this torch does not need is said so at once: its
        # two runs would both be stock torch, and prove nothing.
        not_run = [] if anyway else _verify.not_needed(chosen, version)
        chosen = [name for name in chosen if name not in dict(not_run)]
        not_run = [(name, reason + "; --anyway runs it") for name, reason in not_run]
    else:
        not_run = [(name, "not needed by torch %s" % version)
                   for name in _registry.names() if name not in chosen]
    if chosen:
        workers = min(jobs or _verify.default_jobs(), 2 * len(chosen))
        print("torch-backports verify: torch %s, %d reproducer(s), each run twice in a new "
              "interpreter, %d at a time; this takes minutes, and longer on a busy machine, "
              "where -j 1 runs one at a time."
              % (version, len(chosen), workers), file=sys.stderr)
    verdicts = _verify.verify(names, version,
                              lambda line: print("  " + line, file=sys.stderr, flush=True),
                              jobs=jobs, chosen=chosen)
    outcome = _verify.summarise(verdicts, named=bool(names))
    opt_out = _config.read_opt_out(_registry.names())
    warning = None
    if opt_out.everything or opt_out.names:
        warning = ("%s: verify ignores it, but your own programs run with %s off"
                   % (opt_out.describe(), "every backport" if opt_out.everything
                      else "those backports"))
    if as_json:
        print(json.dumps({"torch": version, "ok": outcome.status == _verify.PASSED,
                          "checked": outcome.checked, "status": outcome.message,
                          "opt_out_warning": warning,
                          "backports": [v.as_dict() for v in verdicts],
                          "not_run": [{"name": n, "reason": r} for n, r in not_run]}, indent=2))
    else:
        print(_verify.table(verdicts, not_run))
        print("\nverify %s" % outcome.message)
        if warning:
            print("WARNING: " + warning)
    return outcome.status


def _diff_command(names: List[str], as_json: bool) -> int:
    """Apply the backports in a new process, as status does, and show what
    each changed (docs/diff.md)."""
    unknown = [name for name in names if _registry.canonical(name) is None]
    if unknown:
        print("torch-backports diff: " + _registry.unknown_names(unknown), file=sys.stderr)
        return 2
    # Names as the opt-out and require() match them: any case, '_' or '-'.
    chosen = list(dict.fromkeys(_registry.canonical(name) for name in names)) \
        or list(_registry.names())
    version = _environment.torch_version()
    result = None
    if version is not None:
        targets = list(dict.fromkeys(_registry.target(name) for name in chosen))
        result = _probe.probe_new_process(targets)
    records = {r["name"]: r for r in (result.records if result and result.ok else [])}
    rows = []
    for name in chosen:
        row = dict(records.get(name) or _records.report(name))
        if version is None:
            row["reason"] = "torch is not installed in this environment"
        elif not result.ok:
            row.update(state=_records.FAILED, reason=result.failure)
        row["changes"] = result.changes.get(name, []) if (
            result is not None and result.ok and row["state"] == _records.APPLIED) else []
        rows.append(row)
    if as_json:
        print(json.dumps({"torch": (result and result.torch_version) or version,
                          "changes_error": result and result.changes_error,
                          "backports": [{key: row[key] for key in
                                         ("name", "state", "reason", "target", "changes")}
                                        for row in rows]}, indent=2))
        return 1 if result is not None and not result.ok else 0
    print("torch-backports diff: torch %s, in a new process that imported the targets"
          % ((result and result.torch_version) or version or "not installed"))
    if result is not None and result.changes_error:
        print("WARNING: the changes could not be read: %s" % result.changes_error)
    for row in rows:
        print()
        if row["state"] != _records.APPLIED:
            print("== %s: %s: %s" % (row["name"], row["state"], row["reason"]))
            continue
        print("== %s: applied (%s)" % (row["name"], row["reason"]))
        for entry in row["changes"]:
            print(_diff.render(entry), end="")
        print(_made_by(row["name"], bool(row["changes"])), end="")
    return 1 if result is not None and not result.ok else 0


def _made_by(name: str, recorded: bool) -> str:
    """Where backport `name`'s patch is written; all of it where the
    helpers recorded nothing (a patch that only registers, in a table of
    torch's, what the recorder cannot see)."""
    import inspect

    apply = _registry.load(name).apply
    try:
        lines, first = inspect.getsourcelines(apply)
        where = "%s:%d" % (inspect.getsourcefile(apply), first)
    except (OSError, TypeError):
        return "patch made by %s.apply (no source)\n" % name
    if recorded:
        return "patch made by apply() at %s\n" % where
    return ("%s recorded no attribute it set; what it does is all in apply() at %s:\n%s\n"
            % (name, where, "\n".join("  %5d | %s" % (first + i, text.rstrip("\n"))
                                       for i, text in enumerate(lines))))


def entry_point() -> None:
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`status | head -3`): stop quietly, as
        # command-line tools do, with the status of a SIGPIPE death. stdout
        # is pointed at /dev/null so the interpreter's own flush at exit
        # cannot raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        status = 128 + 13
    sys.exit(status)
