"""`python -m hf_minitf`: the `minitf` command, for environments whose scripts folder is not on PATH."""

import sys

from hf_minitf.cli import main

if __name__ == "__main__":
    sys.exit(main())
