"""transformers' serving code (`transformers serve`), which `minitf serve` builds on, imported once with a clear
error where this transformers has none, or lacks a part, or its packages (fastapi, uvicorn, openai) are missing."""

from __future__ import annotations

import transformers


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
        raise ServingUnavailable(
            f"minitf serve runs on transformers' serving code (`transformers serve`), which this installation cannot "
            f"import ({error}); install `pip install 'hf-minitf[serve]'` with transformers {transformers.__version__}"
            " or a newer 5.x."
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
    if missing:
        raise ServingUnavailable(
            f"transformers {transformers.__version__}'s serving code lacks {', '.join(missing)}, which minitf serve "
            "builds on (written against transformers 5.24); use transformers 5.24 or newer."
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
