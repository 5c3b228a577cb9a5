-- BPETokenizer: a Lua class over the C Tokenizer (netcl.core.text). Ids are 0-based.
local core = require "netcl.core"
local class = require "netcl.class"

local C = core.text

local BPETokenizer = class("netcl.text.BPETokenizer")

-- Calls a C function and re-raises its error at the caller of the method that called this,
-- so that messages point at the user's line rather than at this file.
local function call(f, ...)
  local ok, r = pcall(f, ...)
  if not ok then error(r, 3) end
  return r
end

-- BPETokenizer(handle) wraps a C Tokenizer; tokenizers are made by the functions below.
function BPETokenizer:init(handle)
  if type(handle) ~= "userdata" then
    error("netcl.text.BPETokenizer: make a tokenizer with BPETokenizer.train, train_file, load, from_tiktoken " ..
          "or from_gpt2", 3)
  end
  self._h = handle
end

-- BPETokenizer.train(texts, {vocab_size=, pattern="cl100k", special_tokens={...}, min_frequency=1})
-- texts: an array of strings. vocab_size counts the 256 bytes, the merges and the special tokens.
function BPETokenizer.train(texts, opts)
  return BPETokenizer(call(C.train, texts, opts))
end

-- BPETokenizer.train_file(path_or_paths, opts): as train, each file read as one text.
function BPETokenizer.train_file(paths, opts)
  return BPETokenizer(call(C.train_file, paths, opts))
end

-- BPETokenizer.load(path): a file written by tok:save(path).
function BPETokenizer.load(path)
  return BPETokenizer(call(C.load, path))
end

-- BPETokenizer.from_tiktoken(path, {pattern="cl100k", special_tokens={[name]=id}})
function BPETokenizer.from_tiktoken(path, opts)
  return BPETokenizer(call(C.from_tiktoken, path, opts))
end

-- BPETokenizer.from_gpt2(encoder_json_path, vocab_bpe_path)
function BPETokenizer.from_gpt2(encoder_json, vocab_bpe)
  return BPETokenizer(call(C.from_gpt2, encoder_json, vocab_bpe))
end

-- tok:encode(s, {allowed_special="none"|"all"|{names...}, strict=true, as_tensor=false})
-- Returns a Lua array of 0-based integer ids, or an int64 Tensor with as_tensor=true.
-- strict (the default) raises on text that holds a special token that is not allowed, and on
-- allowed_special naming a token the tokenizer lacks; strict=false encodes such text as bytes.
-- allowed_special may list names ({"<|endoftext|>"}) or be a set ({["<|endoftext|>"] = true}).
-- as_tensor makes the Tensor (on the default device) in C, without the Lua array.
function BPETokenizer:encode(s, opts)
  return call(self._h.encode, self._h, s, opts)
end

-- tok:decode(ids): ids is a Lua array or a 1-D integer Tensor; returns the bytes as a string.
function BPETokenizer:decode(ids)
  if core.is_tensor(ids) then
    if ids.ndim ~= 1 or (ids.dtype ~= "int64" and ids.dtype ~= "int32" and ids.dtype ~= "uint8") then
      error(("netcl.text.decode: expected a 1-D integer tensor, got %s with shape [%s]")
        :format(ids.dtype, table.concat(ids.shape, ",")), 2)
    end
    ids = ids:tolist()
  end
  return call(self._h.decode, self._h, ids)
end

function BPETokenizer:save(path) call(self._h.save, self._h, path) end
-- largest id + 1 (ids may have gaps, as in cl100k)
function BPETokenizer:vocab_size() return call(self._h.vocab_size, self._h) end
-- id of a token's bytes (special tokens included), or nil
function BPETokenizer:token_to_id(s) return call(self._h.token_to_id, self._h, s) end
-- bytes of a token, or nil for an id that is not in the vocabulary
function BPETokenizer:id_to_token(id) return call(self._h.id_to_token, self._h, id) end
function BPETokenizer:is_special(id) return call(self._h.is_special, self._h, id) end
-- {[name] = id}
function BPETokenizer:special_tokens() return call(self._h.special_tokens, self._h) end
-- the PCRE2 pre-split pattern
function BPETokenizer:pattern() return call(self._h.pattern, self._h) end
-- releases the C tokenizer now (also on __close and collection); later calls raise
function BPETokenizer:free()
  self._h:free()
  self._freed = true
end
BPETokenizer.__close = BPETokenizer.free

function BPETokenizer:__tostring()
  if self._freed then return "BPETokenizer(<freed>)" end
  local n = self._h:vocab_size()
  local specials = 0
  for _ in pairs(self._h:special_tokens()) do specials = specials + 1 end
  return ("BPETokenizer(vocab_size=%d, special_tokens=%d)"):format(n, specials)
end

return BPETokenizer
