// Public alias of the core Status / Expected types.
#pragma once

#include "core/status.h"
