#include "compression/autocompress/router.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

namespace tailor::autocompress {

ArchRouterImpl::ArchRouterImpl(const SearchSpace& space, const RouterOptions& options) {
  for (const ChoiceAxis& axis : space.axes) sizes_.push_back(axis.widths.size());
  const int64_t total = space.total_choices();
  // Seeded init without disturbing the caller's global random stream (the Linear init
  // draws from the global generator, so its state is saved and restored around it).
  at::Generator global = at::detail::getDefaultCPUGenerator();
  const at::Tensor saved = global.get_state();
  torch::manual_seed(options.seed);
  input_ = register_parameter("input", torch::randn({options.input_dim}));
  fc1_ = register_module("fc1", torch::nn::Linear(options.input_dim, options.hidden));
  fc2_ = register_module("fc2", torch::nn::Linear(options.hidden, total));
  global.set_state(saved);
  torch::NoGradGuard no_grad;
  fc2_->weight.zero_();
  fc2_->bias.zero_();
}

std::vector<at::Tensor> ArchRouterImpl::Forward() {
  at::Tensor logits = fc2_->forward(torch::gelu(fc1_->forward(input_.unsqueeze(0)))).squeeze(0);
  std::vector<at::Tensor> out;
  int64_t offset = 0;
  for (int64_t n : sizes_) {
    out.push_back(logits.narrow(0, offset, n));
    offset += n;
  }
  return out;
}

std::vector<at::Tensor> ArchRouterImpl::Probabilities() {
  std::vector<at::Tensor> out;
  for (const at::Tensor& z : Forward()) out.push_back(torch::softmax(z, -1));
  return out;
}

std::unique_ptr<torch::optim::Adam> MakeRouterOptimizer(ArchRouter& router,
                                                        const RouterOptions& options) {
  return std::make_unique<torch::optim::Adam>(router->parameters(),
                                              torch::optim::AdamOptions(options.learning_rate));
}

}  // namespace tailor::autocompress
