// The four multipliers GraniteConfig and GraniteMoeConfig share, read into a Llama-family
// config (models/arch/granite.cpp, models/arch/granitemoe.cpp).
#pragma once

#include "models/arch/llama_family.h"

namespace lathe {

void read_granite_multipliers(const JsonFields& f, LlamaFamilyConfig& c);

}  // namespace lathe
