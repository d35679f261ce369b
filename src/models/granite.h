// The four multipliers GraniteConfig and GraniteMoeConfig share, read into a Llama-family
// config (models/granite.cpp, models/granitemoe.cpp).
#pragma once

#include "models/llama_family.h"

namespace lathe {

void read_granite_multipliers(const JsonFields& f, LlamaFamilyConfig& c);

}  // namespace lathe
