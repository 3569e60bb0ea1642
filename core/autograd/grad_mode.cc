#include "core/autograd/grad_mode.h"

namespace tandem {

namespace {
thread_local bool tls_grad_enabled = true;
}

bool GradMode::enabled() { return tls_grad_enabled; }
void GradMode::set_enabled(bool enabled) { tls_grad_enabled = enabled; }

}  // namespace tandem
