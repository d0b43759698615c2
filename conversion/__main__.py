"""`python -m hf_minitf.conversion SOURCE CHECKPOINT --out DIR`, the old spelling of `python -m hf_minitf convert
SOURCE ...`: warns once, then becomes that command (the same process, by exec: signals reach it as before), since
the library imports no command line."""

import os
import sys
import warnings

NEW_COMMAND = "python -m hf_minitf convert"

warnings.warn(
    f"`python -m hf_minitf.conversion` is deprecated and will be removed; run `{NEW_COMMAND} SOURCE ...` "
    "(or `minitf convert SOURCE ...`) instead.",
    FutureWarning,
    stacklevel=1,
)
sys.stdout.flush()
sys.stderr.flush()
os.execv(sys.executable, [sys.executable, "-m", "hf_minitf", "convert", *sys.argv[1:]])
