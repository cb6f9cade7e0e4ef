// CUDA's math constants; the prelude (gpuedu_device.h) defines them.
#pragma once
