"""The operator's tools, beside the course's modules: the ``gpuedu`` command (``cli``), ``gpuedu doctor``,
``gpuedu gpu-check``, ``gpuedu course`` / ``lessons`` (``course``), ``gpuedu classroom`` / ``grade``
(``classroom``).  They use the course's modules; the course's modules never import them.
"""
