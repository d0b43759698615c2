"""`python -m hf_minitf.conversion SOURCE CHECKPOINT --out DIR`: the same as `minitf convert SOURCE ...`."""

import sys

from hf_minitf.cli import main

raise SystemExit(main(["convert", *sys.argv[1:]]))
