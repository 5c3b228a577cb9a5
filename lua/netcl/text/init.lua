-- netcl.text: byte-level BPE tokenizers (C core in runtime/text) and chat templates.
--   local text = require "netcl.text"
--   local tok = text.BPETokenizer.train(texts, {vocab_size = 4096, pattern = "gpt2"})
--   local chat = text.ChatFormat(tok, {template = "chatml"})
-- docs/text.md has the reference.
local text = {}

text.BPETokenizer = require "netcl.text.bpe"
text.ChatFormat = require "netcl.text.chat"

return text
