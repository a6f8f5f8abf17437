"""`python -m gpulab`: the same as the `gpulab` command."""

import sys

from gpulab.cli.main import main

sys.exit(main())
