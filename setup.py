"""Only what setup.cfg cannot say: the startup files at the wheel's root.

torch_backports.pth and torch_backports.start must sit at the top of
site-packages, beside the package, where site processes them. setup.cfg can
only place files inside packages, so build_py copies them to the root of
build_lib for wheels (including those built from the sdist), and, for
editable installs, to the root of the editable wheel.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

STARTUP_FILES = ("torch_backports.pth", "torch_backports.start")
HERE = os.path.dirname(os.path.abspath(__file__))


class build_py_with_startup_files(build_py):
    def run(self):
        super().run()
        self._startup_outputs = [
            self.copy_file(os.path.join(HERE, name), os.path.join(self._root(), name))[0]
            for name in STARTUP_FILES
        ]

    def _root(self):
        if getattr(self, "editable_mode", False):
            # setuptools' editable_wheel points the install command at the
            # unpacked editable wheel and writes what lands there into it;
            # build_lib is a throw-away folder in that mode.
            return self.get_finalized_command("install").install_lib
        return self.build_lib

    def get_outputs(self, *args, **kwargs):
        return super().get_outputs(*args, **kwargs) + getattr(self, "_startup_outputs", [])


setup(cmdclass={"build_py": build_py_with_startup_files})
