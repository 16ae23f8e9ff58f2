"""Packaging: what the wheel and sdist hold, their metadata, and every way of
installing them.

Each install goes into a new virtual environment; the test then starts that
environment's interpreter and checks that site ran our startup hook. build
and twine are deps of tox's packaging env: where one is missing, these tests
fail, never skip.
"""

import configparser
import email.parser
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import child_env

ROOT = Path(__file__).resolve().parents[2]
STARTUP_FILES = ("torch_backports.pth", "torch_backports.start")


def run(*cmd, cwd=None):
    done = subprocess.run([str(c) for c in cmd], env=child_env(), capture_output=True, text=True,
                          cwd=cwd, timeout=900, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, "%s\n%s\n%s" % (cmd, done.stdout[-2000:], done.stderr[-4000:])
    return done


def build_with_log(source, outdir):
    """`python -m build`: the wheel, the sdist, and what build printed."""
    done = run(sys.executable, "-m", "build", "--outdir", outdir, source)
    return (next(Path(outdir).glob("*.whl")), next(Path(outdir).glob("*.tar.gz")),
            done.stdout + done.stderr)


def build(source, outdir):
    return build_with_log(source, outdir)[:2]


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    return build_with_log(ROOT, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def dists(built):
    return built[:2]


class Venv:
    def __init__(self, path):
        run(sys.executable, "-m", "venv", path)
        self.path = path
        self.python = path / "bin" / "python"
        purelib = run(self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
        self.site = Path(purelib.stdout.strip())

    def pip(self, *args):
        return run(self.python, "-m", "pip", "--disable-pip-version-check", *args)

    def startup_state(self):
        done = run(self.python, "-c",
                   "import sys, torch_backports; print(torch_backports._startup_state,"
                   " 'wrapt' in sys.modules)", cwd="/")
        return done.stdout.split()

    def ours(self):
        """Files and folders of ours left in site-packages."""
        return sorted(p.name for p in self.site.iterdir()
                      if "torch_backports" in p.name.replace("-", "_"))


def test_wheel_has_startup_files_at_its_root(dists):
    wheel, _ = dists
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        for name in STARTUP_FILES:
            assert name in names
            assert archive.read(name) == (ROOT / name).read_bytes()
    pth = (ROOT / "torch_backports.pth").read_text().splitlines()
    assert len(pth) == 1 and pth[0].startswith("import ")
    assert (ROOT / "torch_backports.start").read_text().strip() == "torch_backports:install"


def test_sdist_carries_what_a_wheel_needs(dists):
    _, sdist = dists
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    docs = [str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")]
    assert docs
    for name in STARTUP_FILES + ("setup.py", "setup.cfg", "pyproject.toml", "LICENSE",
                                 "README.md", "torch_backports/__init__.py", *docs):
        assert name in names


def test_build_warns_of_nothing_and_twine_check_strict_passes(built):
    wheel, sdist, log = built
    # setuptools' deprecations (e.g. a License :: classifier beside
    # license_expression) are warnings today and errors tomorrow.
    assert not re.findall(r"\w*Warning\b.*", log), log[-4000:]
    # --strict also renders the long description (README.md) as PyPI would.
    done = run(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist)
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_metadata_license_urls_and_classifiers(dists):
    wheel, _ = dists
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = email.parser.Parser().parsestr(archive.read(
            next(n for n in names if n.endswith(".dist-info/METADATA"))).decode("utf-8"))
        licence = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert len(licence) == 1
        assert archive.read(licence[0]) == (ROOT / "LICENSE").read_bytes()
    assert "BSD 3-Clause" in (ROOT / "LICENSE").read_text()
    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert metadata.get_all("License-File") == ["LICENSE"]
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL"))
    assert sorted(urls) == ["Homepage", "Issues", "Source"]
    assert all(url.startswith("https://github.com/torch-backports/torch-backports")
               for url in urls.values())
    classifiers = metadata.get_all("Classifier")
    assert not [c for c in classifiers if c.startswith("License ::")]
    # One Python classifier per unit-test env in tox.ini, py39 ... py313.
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    tox_pythons = re.findall(r"\bpy3(\d+)\b", tox["tox"]["env_list"])
    assert tox_pythons
    declared = sorted(int(m) for c in classifiers
                      for m in re.findall(r"^Programming Language :: Python :: 3\.(\d+)$", c))
    assert declared == sorted({int(v) for v in tox_pythons})
    assert metadata["Requires-Python"] == ">=3.%d" % declared[0]
    for needed in ("Development Status :: 3 - Alpha", "Operating System :: POSIX :: Linux",
                   "Topic :: Scientific/Engineering :: Artificial Intelligence"):
        assert needed in classifiers


@pytest.mark.parametrize("how", ["wheel", "sdist", "editable", "uv"])
def test_install_activates_reinstalls_and_uninstalls_clean(how, dists, tmp_path):
    wheel, sdist = dists
    venv = Venv(tmp_path / "venv")
    target = {"wheel": [wheel], "sdist": [sdist], "editable": ["-e", ROOT], "uv": [wheel]}[how]
    if how == "uv":
        uv = shutil.which("uv", path=os.path.dirname(sys.executable))
        assert uv, "uv is not installed in the test env"
        run(uv, "pip", "install", "--python", venv.python, *target)
        run(uv, "pip", "install", "--python", venv.python, "--reinstall", *target)
    else:
        venv.pip("install", *target)
        venv.pip("install", "--force-reinstall", "--no-deps", *target)
    for name in STARTUP_FILES:
        assert (venv.site / name).is_file(), venv.ours()
    # Armed and waiting: site ran the hook, and wrapt was not imported.
    assert venv.startup_state() == ["watching", "False"]
    if how == "uv":
        run(uv, "pip", "uninstall", "--python", venv.python, "torch-backports")
    else:
        venv.pip("uninstall", "-y", "torch-backports")
    assert venv.ours() == []


def test_upgrade_over_an_older_install(dists, tmp_path):
    old_tree = tmp_path / "old"
    shutil.copytree(ROOT, old_tree, ignore=shutil.ignore_patterns(".git", ".tox", "build", "dist"))
    init = old_tree / "torch_backports" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "0.'))
    old_wheel, _ = build(old_tree, tmp_path / "old-dist")
    venv = Venv(tmp_path / "venv")
    venv.pip("install", old_wheel)
    venv.pip("install", "--upgrade", dists[0])
    version = run(venv.python, "-c", "import torch_backports as t; print(t.__version__)")
    assert not version.stdout.startswith("0.")
    assert venv.startup_state() == ["watching", "False"]
    venv.pip("uninstall", "-y", "torch-backports")
    assert venv.ours() == []
