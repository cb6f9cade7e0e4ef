"""The operator's tools, beside the course's modules: the ``gpuedu`` command (``cli``), ``gpuedu doctor``,
``gpuedu gpu-check``, ``gpuedu course`` / ``lessons`` (``course``), ``gpuedu classroom`` / ``grade``
(``classroom``), and ``machine``, the one description of the machine they and the bench's results read.
They use the course's modules; of the course's modules only the bench reads one of them (``machine``).
"""
