"""Installed means usable: MiniTF's classes are registered with transformers as transformers loads its Auto classes,
in every process of an environment where hf_minitf is installed, without `import hf_minitf`.

At interpreter start Python runs `start()`: through `hf_minitf.start` (PEP 829's entry point, Python 3.15 and
later, where `.pth` import lines are deprecated and from 3.18 ignored) or through the import line of `hf_minitf.pth`
(earlier Pythons; 3.15 to 3.17 skip it where the `.start` file is there). Both are written into site-packages by
setup.py, for wheels and editable installs. Start-up imports nothing: it puts one finder on `sys.meta_path` that
counts the imports of transformers' modules, and of the MiniTF modules the registration imports, in progress. When
the outermost of them ends, each part of the registration whose transformers module is now loaded runs once
(`PARTS`, the functions of hf_minitf.registration): a process pays only for what the parts of transformers it loaded
can use, and nothing for the model code until it builds a MiniTF config. Waiting for the outermost import means no
part runs while a module it imports is half-imported (transformers' `modeling_layers` loads `modeling_auto` before
it defines the class MiniTF's layers subclass).

Stdlib only and outside the `hf_minitf` package, so that start-up does not run the package's `__init__`.
`import hf_minitf` installs the same finder where no start-up hook ran it (a source checkout on sys.path).
Set HF_MINITF_NO_AUTOREGISTER=1 (or true, yes, on) to skip the start-up install: hf_minitf then registers only once imported.
"""

import os
import sys
from _thread import RLock

DISABLE_VARIABLE = "HF_MINITF_NO_AUTOREGISTER"
# The values that turn the start-up install off, as transformers reads its boolean variables; 0, false, no, off or
# anything else keep it.
TRUE_VALUES = frozenset({"1", "true", "yes", "on"})
REGISTRATION = "hf_minitf.registration"
# Each part of the registration (a function of hf_minitf.registration, given the module), by the module it extends, in
# the order they run: transformers' Auto classes and pipeline registry, and MiniTF's model code, which the package
# gives its checks and cards (a saved folder's copy of that code has none).
PARTS = {
    "transformers.models.auto.configuration_auto": "register_configs",
    "transformers.models.auto.modeling_auto": "register_models",  # of the families whose config was built
    "transformers.models.auto.tokenization_auto": "register_tokenizers",
    "transformers.pipelines": "register_pipelines",
    "hf_minitf.modeling.configuration_minitf_gpt": "add_config_checks",
    "hf_minitf.modeling.configuration_minitf_encoder": "add_config_checks",
    "hf_minitf.modeling.configuration_minitf_seq2seq": "add_config_checks",
    "hf_minitf.modeling.layers": "add_model_checks",
    "hf_minitf.modeling.pipeline_minitf_translation": "add_pipeline_cards",
}
# The imports counted: transformers' and those of the MiniTF modules the parts import.
COUNTED = ("transformers.", "hf_minitf.modeling.")


class _CountingLoader:
    """The loader a counted module would have had, telling the finder when the module starts and ends running."""

    def __init__(self, loader, finder: "RegisteringFinder"):
        self._loader = loader
        self._finder = finder

    def __getattr__(self, name: str):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._finder.started()
        try:
            self._loader.exec_module(module)
        finally:
            self._finder.ended()


class RegisteringFinder:
    """Finds no module itself: it gives each counted module the loader another finder found, wrapped to count."""

    def __init__(self) -> None:
        self._lock = RLock()
        self._in_progress = 0
        self._registering = False
        self.done: set[str] = set()
        self.failed: dict[str, Exception] = {}

    def find_spec(self, name: str, path=None, target=None):
        if len(self.done) == len(PARTS) or not (name == "transformers" or name.startswith(COUNTED)):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _CountingLoader(spec.loader, self)  # type: ignore[assignment]  # a loader by duck typing: importlib.abc would cost every interpreter start
                return spec
        return None

    def started(self) -> None:
        with self._lock:
            self._in_progress += 1

    def ended(self) -> None:
        with self._lock:
            self._in_progress -= 1
        self.register_loaded()

    def register_loaded(self) -> None:
        """Run, once each, the parts whose transformers module is loaded (a part's imports may load the module of
        another: until none is left); nothing while a counted import is in progress or a part is running."""
        with self._lock:
            if self._in_progress or self._registering:
                return
            self._registering = True
        try:
            self._run_ready_parts()
        finally:
            self._registering = False

    def _run_ready_parts(self) -> None:
        while True:
            ready = [name for name in PARTS if name not in self.done and name in sys.modules]
            if not ready:
                return
            for name in ready:
                self.done.add(name)
                try:
                    from importlib import import_module

                    getattr(import_module(REGISTRATION), PARTS[name])(sys.modules[name])
                except Exception as error:  # a broken hf_minitf must not break transformers for everything else
                    import warnings

                    self.failed[name] = error
                    warnings.warn(
                        f"hf_minitf could not register with transformers once {name} loaded ({type(error).__name__}: "
                        f"{error}); `import hf_minitf; hf_minitf.register()` raises it with its traceback, and "
                        f"{DISABLE_VARIABLE}=1 skips it",
                        RuntimeWarning,
                        stacklevel=2,
                    )


def install(at_start: bool = False) -> RegisteringFinder | None:
    """Put the finder first on `sys.meta_path` (once) and return it; at start-up, not where HF_MINITF_NO_AUTOREGISTER
    is set (then None)."""
    for finder in sys.meta_path:
        if isinstance(finder, RegisteringFinder):
            return finder
    if at_start and os.environ.get(DISABLE_VARIABLE, "").strip().lower() in TRUE_VALUES:
        return None
    finder = RegisteringFinder()
    sys.meta_path.insert(0, finder)
    return finder


def start() -> None:
    """The start-up hook: `hf_minitf.start`'s entry point and `hf_minitf.pth`'s import line."""
    install(at_start=True)
