"""PyTorch's side of tests/lua/test_transformer_torch.lua: a Llama decoder written out by hand after
Meta's reference model (RMSNorm, rotary embeddings on consecutive pairs, grouped-query attention
with a causal mask, SwiGLU feed-forward, pre-norm residual blocks), since Debian's torch 1.13 has
neither scaled_dot_product_attention nor nn.RMSNorm. Safetensors files go through torch_mlp.py's
reader and writer.

  torch_llama.py probe                   exits 0 when torch imports
  torch_llama.py block IN OUT CFG        IN: a DecoderBlock's weights (Llama names), "x" and "dout";
                                         OUT: "y" and the gradients "grad.x", "grad.<weight>" of
                                         sum(y * dout)
  torch_llama.py logits CKPT IN OUT CFG  loads a GPT state_dict (strict) and writes the logits of
                                         the int64 "ids" in IN to OUT
  torch_llama.py export CKPT IN OUT CFG  writes a freshly initialized model's state_dict to CKPT and
                                         the logits of "ids" to OUT
  torch_llama.py all DIR CFG             block DIR/block_in DIR/block_out, logits DIR/ours DIR/ids
                                         DIR/l1 and export DIR/theirs DIR/ids DIR/l2 (.safetensors),
                                         in one process (torch imports once)
CFG is JSON: {"dim", "n_heads", "n_kv_heads", "ffn_hidden", "eps", "theta", "vocab_size", "n_layers"}.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from torch_mlp import read_st, write_st  # noqa: E402


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim, dtype=torch.float64))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, theta):
    """x [B, T, H, D]: pairs (x[2p], x[2p+1]) at position t turn by t * theta^(-2p/D)."""
    d = x.shape[-1]
    inv = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.arange(x.shape[1], dtype=torch.float64)[:, None] * inv[None, :]  # [T, D/2]
    c, s = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)


def linear(i, o):
    return torch.nn.Linear(i, o, bias=False, dtype=torch.float64)


class Attention(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.h, self.hkv, self.hd, self.theta = c["n_heads"], c["n_kv_heads"], c["dim"] // c["n_heads"], c["theta"]
        self.wq = linear(c["dim"], self.h * self.hd)
        self.wk = linear(c["dim"], self.hkv * self.hd)
        self.wv = linear(c["dim"], self.hkv * self.hd)
        self.wo = linear(self.h * self.hd, c["dim"])

    def forward(self, x):
        b, t, _ = x.shape
        q = rope(self.wq(x).view(b, t, self.h, self.hd), self.theta)
        k = rope(self.wk(x).view(b, t, self.hkv, self.hd), self.theta)
        v = self.wv(x).view(b, t, self.hkv, self.hd)
        rep = self.h // self.hkv
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        s = q @ k.transpose(2, 3) / math.sqrt(self.hd)
        s = s + torch.full((t, t), float("-inf"), dtype=s.dtype).triu(1)
        o = torch.softmax(s, dim=-1) @ v
        return self.wo(o.transpose(1, 2).reshape(b, t, -1))


class FeedForward(torch.nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1, self.w2, self.w3 = linear(dim, hidden), linear(hidden, dim), linear(dim, hidden)

    def forward(self, x):
        return self.w2(torch.nn.functional.silu(self.w1(x)) * self.w3(x))


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = Attention(c)
        self.feed_forward = FeedForward(c["dim"], c["ffn_hidden"])
        self.attention_norm = RMSNorm(c["dim"], c["eps"])
        self.ffn_norm = RMSNorm(c["dim"], c["eps"])

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.tok_embeddings = torch.nn.Embedding(c["vocab_size"], c["dim"], dtype=torch.float64)
        self.layers = torch.nn.ModuleList([Block(c) for _ in range(c["n_layers"])])
        self.norm = RMSNorm(c["dim"], c["eps"])
        self.output = linear(c["dim"], c["vocab_size"])

    def forward(self, ids):
        h = self.tok_embeddings(ids)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def f64(sd):
    return {k: v.to(torch.float64) for k, v in sd.items()}


def main(argv):
    if argv[1] == "probe":
        return 0
    if argv[1] == "all":
        d = argv[2]
        f = lambda n: os.path.join(d, n + ".safetensors")  # noqa: E731
        for cmd in (["block", f("block_in"), f("block_out")], ["logits", f("ours"), f("ids"), f("l1")],
                    ["export", f("theirs"), f("ids"), f("l2")]):
            main([argv[0]] + cmd + [argv[3]])
        return 0
    cfg = json.loads(argv[-1])
    if argv[1] == "block":
        data = f64(read_st(argv[2]))
        block = Block(cfg)
        block.load_state_dict({k: v for k, v in data.items() if k not in ("x", "dout")}, strict=True)
        x = data["x"].clone().requires_grad_(True)
        y = block(x)
        (y * data["dout"]).sum().backward()
        out = {"y": y.detach(), "grad.x": x.grad}
        for name, p in block.named_parameters():
            out["grad." + name] = p.grad
        write_st(argv[3], out)
    elif argv[1] in ("logits", "export"):
        model = Transformer(cfg)
        if argv[1] == "logits":
            model.load_state_dict(f64(read_st(argv[2])), strict=True)
        else:
            torch.manual_seed(7)
            for name, p in model.named_parameters():
                with torch.no_grad():
                    p.copy_(torch.randn_like(p) * (0.2 if "norm" not in name else 0.1) + (1 if "norm" in name else 0))
            write_st(argv[2], {k: v.to(torch.float32) for k, v in model.state_dict().items()})
        ids = read_st(argv[3])["ids"]
        with torch.no_grad():
            write_st(argv[4], {"logits": model(ids)})
    else:
        print("unknown command " + argv[1], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
