"""What the package declares once, light to import (no torch, no transformers): the model families, their
presets, the bounds and choices of options, the conversion sources and the export formats' names, and the
package's extras (`packaging`).

The `minitf` parser reads it without importing torch; every module of the package asks it instead of keeping
its own table.
"""

from hf_minitf.catalog.converters import CONVERTERS, Converter
from hf_minitf.catalog.exports import EXPORTS
from hf_minitf.catalog.families import FAMILIES, MODEL_TYPES, Family, family_named, family_of_model_type
from hf_minitf.catalog.presets import FRAWDLLM_PRESETS, PRESETS, FrawdLLMSize, Preset, get_preset

__all__ = [
    "CONVERTERS",
    "EXPORTS",
    "FAMILIES",
    "FRAWDLLM_PRESETS",
    "MODEL_TYPES",
    "PRESETS",
    "Converter",
    "Family",
    "FrawdLLMSize",
    "Preset",
    "family_named",
    "family_of_model_type",
    "get_preset",
]
