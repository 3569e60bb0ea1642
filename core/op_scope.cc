#include "core/op_scope.h"

namespace tandem {

namespace {
thread_local OpObserver* tls_observer = nullptr;
thread_local int tls_depth = 0;
}  // namespace

void set_op_observer(OpObserver* observer) {
  tls_observer = observer;
  tls_depth = 0;
}

OpObserver* op_observer() { return tls_observer; }

OpScope::OpScope(std::string_view name, bool backward) {
  if (tls_observer == nullptr) return;
  counted_ = true;
  if (tls_depth++ == 0) {
    try {
      tls_observer->begin(name, backward);
    } catch (...) {
      --tls_depth;
      counted_ = false;
      throw;
    }
    reported_ = tls_observer;
  }
}

OpScope::~OpScope() {
  if (counted_ && tls_depth > 0) --tls_depth;
  if (reported_ != nullptr) reported_->end();
}

}  // namespace tandem
