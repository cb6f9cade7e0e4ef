"""`python -m gpuedu.bench`: the same as `gpuedu bench`."""
import sys

from . import main

sys.exit(main())
