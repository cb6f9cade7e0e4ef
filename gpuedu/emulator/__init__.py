"""PyCUDA's API on the CPU: the CUDA C given to SourceModule runs as compiled C++.

``gpuedu.setup()`` makes ``import pycuda.driver`` (and ``compiler``, ``gpuarray``,
``autoinit``, ``elementwise``, ``reduction``, ``tools``) resolve to the modules of
this package when no usable NVIDIA GPU is present.  They can also be imported
directly, e.g. ``import gpuedu.emulator.driver as drv``.
"""
