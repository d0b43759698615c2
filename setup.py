"""What pyproject.toml cannot say: `hf_minitf.pth` goes into site-packages, in wheels and in editable installs.

Python runs it at interpreter start; it installs `_hf_minitf_autoregister`'s finder, which registers MiniTF with
transformers as transformers loads, so that an installed hf_minitf needs no `import hf_minitf`.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH_FILE = "hf_minitf.pth"
PTH_LINE = "import _hf_minitf_autoregister; _hf_minitf_autoregister.install(at_start=True)\n"


class BuildPyWithPth(build_py):
    """build_py, then the .pth beside the top-level modules: in build_lib for a wheel; in the editable wheel's
    own folder for `pip install -e` (setuptools puts what install_lib holds there into that wheel)."""

    def run(self) -> None:
        super().run()
        folder = self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, PTH_FILE), "w", encoding="utf-8") as handle:
            handle.write(PTH_LINE)


setup(cmdclass={"build_py": BuildPyWithPth})
