"""What pyproject.toml cannot say: the start-up hook's two files go into site-packages, in wheels and in editable
installs.

`hf_minitf.start` names the hook as an entry point (PEP 829: Python 3.15 and later run it and skip the `.pth`
import line beside it; from 3.18 `.pth` import lines are ignored); `hf_minitf.pth` runs the same hook on earlier
Pythons. It installs `_hf_minitf_autoregister`'s finder, which registers MiniTF with transformers as transformers
loads, so that an installed hf_minitf needs no `import hf_minitf`.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

START_UP_FILES = {
    "hf_minitf.start": "_hf_minitf_autoregister:start\n",
    "hf_minitf.pth": "import _hf_minitf_autoregister; _hf_minitf_autoregister.start()\n",
}


class BuildPyWithStartUpHook(build_py):
    """build_py, then the start-up files beside the top-level modules: in build_lib for a wheel; in the editable
    wheel's own folder for `pip install -e` (setuptools puts what install_lib holds there into that wheel)."""

    def run(self) -> None:
        super().run()
        folder = self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib
        os.makedirs(folder, exist_ok=True)
        for name, text in START_UP_FILES.items():
            with open(os.path.join(folder, name), "w", encoding="utf-8") as handle:
                handle.write(text)


setup(cmdclass={"build_py": BuildPyWithStartUpHook})
