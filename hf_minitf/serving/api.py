"""transformers' serving code (`transformers serve`), which `minitf serve` builds on, imported once with a clear
error where this transformers has none, or lacks a part, or its packages (fastapi, uvicorn, openai) are missing."""

from __future__ import annotations

import transformers

from hf_minitf.catalog.packaging import EXTRAS, missing_extra


class ServingUnavailable(ImportError):
    """transformers' serving code, or one of its packages (fastapi, uvicorn, openai), is missing."""


def serving_api():
    """transformers' serving modules; a clear error where this transformers has none or its extras are missing."""
    try:
        import fastapi  # noqa: F401
        import openai  # noqa: F401
        import uvicorn  # noqa: F401
        from transformers.cli.serving import chat_completion, completion, model_manager, response, server, utils
        from transformers.cli.serving.systemone import SystemOneHandler
        from transformers.cli.serving.transcription import TranscriptionHandler
    except ImportError as error:
        if missing_extra(error) is not None:  # the serve extra is not installed: the command says which to install
            raise
        raise ServingUnavailable(
            f"minitf serve runs on transformers' serving code (`transformers serve`), which this installation cannot "
            f"import ({error}); {EXTRAS['serve'].install} installs it with the transformers it runs on (5.24)."
        ) from error
    needed = {
        server: ("build_server",),
        model_manager: ("ModelManager",),
        utils: ("GenerationState", "Modality"),
        completion: ("CompletionHandler",),
        chat_completion: ("ChatCompletionHandler",),
        response: ("ResponseHandler",),
    }
    missing = [
        f"{module.__name__}.{name}" for module, names in needed.items() for name in names if not hasattr(module, name)
    ]
    if not missing and not hasattr(model_manager.ModelManager, "process_model_name"):
        missing.append(f"{model_manager.__name__}.ModelManager.process_model_name")
    if missing:
        raise ServingUnavailable(
            f"transformers {transformers.__version__}'s serving code lacks {', '.join(missing)}, which minitf serve "
            f"builds on (written against transformers 5.24, which 5.25 rewrote): {EXTRAS['serve'].install} installs "
            "the transformers it runs on."
        )
    return server, model_manager, utils, completion, chat_completion, response, SystemOneHandler, TranscriptionHandler


(server, model_manager, utils, completion, chat_completion, response, SystemOneHandler, TranscriptionHandler) = (
    serving_api()
)

__all__ = [
    "ServingUnavailable",
    "SystemOneHandler",
    "TranscriptionHandler",
    "chat_completion",
    "completion",
    "model_manager",
    "response",
    "server",
    "utils",
]
