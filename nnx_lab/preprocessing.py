"""``nnx_lab.preprocessing`` (§2.17): train-only standardization, reloaded never refitted."""

from .data import Standardizer, StandardizerError
from .errors import PreprocessingError

__all__ = ["PreprocessingError", "Standardizer", "StandardizerError"]
