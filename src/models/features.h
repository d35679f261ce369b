// What an unsupported checkpoint needs that lathe lacks: features read off config.json
// (a vision tower, state-space layers, quantized weights, ...), for `lathe inspect` and the lab.
#pragma once

#include <string>
#include <vector>

#include "io/json.h"

namespace lathe {

struct FeatureSignal {
  std::string feature;   // "quantized weights"
  std::string evidence;  // "config.json field \"quantization_config\" = {...}"
};

// The features config.json shows that no supported architecture implements. Empty when
// config.json gives no such signal (then the architecture's block itself is what is new).
std::vector<FeatureSignal> unsupported_features(const Json& config);

}  // namespace lathe
