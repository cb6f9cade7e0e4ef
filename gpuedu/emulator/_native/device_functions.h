// Provided by the emulator's prelude (gpuedu_prelude.h), which every kernel module includes first.
#pragma once
