"""One `torch.onnx.export(dynamo=True)` call for every ONNX graph the package writes (the encoder's, the GPT's
decoder with its cache, the translator's three), quiet: what torch's exporter says about itself is not the user's
business (torchvision's operators it skips where torchvision is not installed, a deprecation inside torch's own pytree
code, dimension names sharing their constraints)."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

# Messages torch's exporter gives about itself, not about the model being exported.
EXPORTER_WARNINGS = (
    ".*will not be used, since it shares the same shape constraints",  # axes sharing a name share their constraints
    ".*isinstance\\(treespec, LeafSpec\\)",  # torch.utils._pytree, inside torch.export
)
EXPORTER_LOGGER = "torch.onnx"
"""Logs "torchvision is not installed. Skipping torchvision::nms" (and three more) at each export."""


@contextlib.contextmanager
def quiet_exporter() -> Iterator[None]:
    """Inside: torch's exporter logs only errors, and its own warnings are filtered."""
    logger = logging.getLogger(EXPORTER_LOGGER)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            for message in EXPORTER_WARNINGS:
                warnings.filterwarnings("ignore", message=message)
            yield
    finally:
        logger.setLevel(level)


def export_graph(
    module: torch.nn.Module,
    args: tuple,
    input_names: list[str],
    output_names: list[str],
    dynamic_shapes: Any,
    path: Path,
) -> None:
    """`module` (in eval mode, without gradients) traced on example `args` into one ONNX file at `path`, with these
    input and output names and dynamic axes."""
    with torch.no_grad(), quiet_exporter():
        program = torch.onnx.export(
            module.eval(),
            args,
            dynamo=True,
            input_names=input_names,
            output_names=output_names,
            dynamic_shapes=dynamic_shapes,
            verbose=False,
        )
    program.save(str(path), external_data=False)  # type: ignore[union-attr]  # dynamo=True returns the program
