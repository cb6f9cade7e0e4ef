"""The package's version, in a module of its own so that any module can read it without importing the
package's face (``gpuedu/__init__.py``); pyproject.toml holds the same string (tests/test_install.py)."""
__version__ = "0.1.0"
