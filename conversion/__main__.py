"""`python -m hf_minitf.conversion SOURCE CHECKPOINT --out DIR`: the `minitf convert` command."""

from .cli import main

raise SystemExit(main())
