"""The operator's tools, beside the course's modules: the ``gpuedu`` command (``cli``), ``gpuedu doctor``,
``gpuedu gpu-check``, ``gpuedu course`` / ``lessons`` (``course``), ``gpuedu classroom`` / ``grade``
(``classroom``). They use the course's modules, and none of those imports them; the one description of the
machine they and the bench's results read is ``gpuedu.machine``, below both.
"""
