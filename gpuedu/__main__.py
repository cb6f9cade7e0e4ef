"""``python -m gpuedu doctor|course|backend|bench|gpu-check``: the same as the ``gpuedu`` command."""
import sys

from .tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
