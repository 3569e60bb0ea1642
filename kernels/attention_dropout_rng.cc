// TANDEM_ATTENTION_DROPOUT_RNG (see attention_dropout_rng.h).
#include "kernels/attention_dropout_rng.h"

#include "core/env_switch.h"

namespace tandem::kernels {

namespace {

constinit EnvSwitch<AttentionDropoutRng, 2> g_attention_dropout_rng{
    "TANDEM_ATTENTION_DROPOUT_RNG",
    {{"philox10x8", AttentionDropoutRng::Philox10x8}, {"philox7x16", AttentionDropoutRng::Philox7x16}}};

}  // namespace

AttentionDropoutRng attention_dropout_rng() { return g_attention_dropout_rng.value(); }
AttentionDropoutRng parse_attention_dropout_rng(const char* v) { return g_attention_dropout_rng.parse(v); }
void set_attention_dropout_rng_for_testing(std::optional<AttentionDropoutRng> rng) {
  g_attention_dropout_rng.force_for_testing(rng);
}
const char* attention_dropout_rng_name(AttentionDropoutRng rng) { return g_attention_dropout_rng.name(rng); }

}  // namespace tandem::kernels
