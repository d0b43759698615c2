"""Fixtures of the conversion tests."""

import sys
import types

import pytest


@pytest.fixture
def as_frawdllm_model_config(monkeypatch):
    """A function that makes a class pickle as FrawdLLM's `src.model.config.ModelConfig` for one test: the modules
    src, src.model and src.model.config (holding the class) are put in sys.modules and the class is named after it."""

    def install(config_class: type) -> type:
        module = types.ModuleType("src.model.config")
        module.ModelConfig = config_class
        for name, value in (
            ("src", types.ModuleType("src")),
            ("src.model", types.ModuleType("src.model")),
            ("src.model.config", module),
        ):
            monkeypatch.setitem(sys.modules, name, value)
        monkeypatch.setattr(config_class, "__module__", "src.model.config")
        config_class.__qualname__ = "ModelConfig"  # a class defined inside a test has a longer one
        return config_class

    return install
