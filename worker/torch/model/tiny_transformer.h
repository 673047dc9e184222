// A small transformer-like module for engine tests, examples and benchmarks: token embedding, pre-norm causal
// self-attention and MLP blocks, final norm, untied head. Small enough for 4 oversubscribed MPI ranks on 2
// cores.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace zerofit::worker {

struct TinyBlockImpl : torch::nn::Module {
  TinyBlockImpl(int64_t dim, int64_t hidden)
      : ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        // No qkv bias (as in Llama): the key bias gets a mathematically zero gradient (softmax is shift
        // invariant), i.e. pure rounding noise that Adam's g / sqrt(v) would amplify into arbitrary updates.
        qkv(register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(false)))),
        proj(register_module("proj", torch::nn::Linear(dim, dim))),
        ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        up(register_module("up", torch::nn::Linear(dim, hidden))),
        down(register_module("down", torch::nn::Linear(hidden, dim))) {}

  torch::Tensor forward(torch::Tensor x) {
    const int64_t t = x.size(1), d = x.size(2);
    auto parts = qkv(ln1(x)).chunk(3, -1);
    torch::Tensor scores =
        torch::matmul(parts[0], parts[1].transpose(1, 2)) / std::sqrt(static_cast<double>(d));
    torch::Tensor mask = torch::ones({t, t}, x.options().dtype(torch::kBool)).triu(1);  // on x's device
    scores = scores.masked_fill(mask, -1e9);
    x = x + proj(torch::matmul(torch::softmax(scores, -1), parts[2]));
    return x + down(torch::gelu(up(ln2(x))));
  }

  torch::nn::LayerNorm ln1;
  torch::nn::Linear qkv, proj;
  torch::nn::LayerNorm ln2;
  torch::nn::Linear up, down;
};
TORCH_MODULE(TinyBlock);

struct TinyTransformerImpl : torch::nn::Module {
  TinyTransformerImpl(int64_t vocab, int64_t dim, int64_t layers)
      : embed(register_module("embed", torch::nn::Embedding(vocab, dim))),
        norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        head(register_module("head", torch::nn::Linear(dim, vocab))) {
    for (int64_t i = 0; i < layers; ++i)
      blocks.push_back(register_module("block" + std::to_string(i), TinyBlock(dim, 2 * dim)));
  }

  // Sum over all tokens of the next-token cross-entropy (a SUM, as the ZeRO-2 protocol expects).
  torch::Tensor LossSum(const torch::Tensor& tokens) {
    torch::Tensor x = embed(tokens.slice(1, 0, -1));
    for (auto& b : blocks) x = b->forward(x);
    torch::Tensor logits = head(norm(x));
    return torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), tokens.slice(1, 1).reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  }

  torch::nn::Embedding embed;
  std::vector<TinyBlock> blocks;
  torch::nn::LayerNorm norm;
  torch::nn::Linear head;
};
TORCH_MODULE(TinyTransformer);

}  // namespace zerofit::worker
