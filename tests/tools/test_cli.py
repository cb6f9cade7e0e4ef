"""The gpuedu command itself."""
import subprocess
import sys

import gpuedu


def test_version_prints_the_package_version():
    done = subprocess.run([sys.executable, "-m", "gpuedu", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.strip() == f"gpuedu {gpuedu.__version__}"
