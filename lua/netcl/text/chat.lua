-- ChatFormat: renders chat messages with a template and encodes them with the template's special
-- tokens. A template is a list of parts: {special = name} for a special token, {text = s} for
-- ordinary text. Rendering concatenates the parts; encoding maps each special part to its id
-- and encodes the runs of text between them as ordinary text, so a message whose content
-- contains special-token text (say "<|im_end|>") cannot forge a turn boundary.
local class = require "netcl.class"
local BPETokenizer = require "netcl.text.bpe"

local ChatFormat = class("netcl.text.ChatFormat")

local function trim(s)
  return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

-- Each template: the special tokens it needs, the parts that open a conversation, the parts of
-- one message, the parts that prompt the assistant, and the token that ends a turn.
local TEMPLATES = {
  -- <|im_start|>{role}\n{content}<|im_end|>\n
  chatml = {
    specials = {"<|im_start|>", "<|im_end|>"},
    begin = {},
    message = function(role, content)
      return {{special = "<|im_start|>"}, {text = role .. "\n" .. content}, {special = "<|im_end|>"}, {text = "\n"}}
    end,
    generation = {{special = "<|im_start|>"}, {text = "assistant\n"}},
    stop = "<|im_end|>",
  },
  -- <|begin_of_text|> then per message
  -- <|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>
  -- (Meta's template trims the content.)
  llama3 = {
    specials = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
    begin = {{special = "<|begin_of_text|>"}},
    message = function(role, content)
      return {{special = "<|start_header_id|>"}, {text = role}, {special = "<|end_header_id|>"},
              {text = "\n\n" .. trim(content)}, {special = "<|eot_id|>"}}
    end,
    generation = {{special = "<|start_header_id|>"}, {text = "assistant"}, {special = "<|end_header_id|>"},
                  {text = "\n\n"}},
    stop = "<|eot_id|>",
  },
}

local function template_names()
  local names = {}
  for k in pairs(TEMPLATES) do names[#names + 1] = ("%q"):format(k) end
  table.sort(names)
  return table.concat(names, ", ")
end

-- text.ChatFormat(tok, {template = "chatml" | "llama3"}). Errors at level 3 are the caller's line
-- (netcl.class calls init).
function ChatFormat:init(tok, opts)
  opts = opts or {}
  if not class.is_instance(tok, BPETokenizer) then
    error("netcl.text.ChatFormat: argument 1 must be a BPETokenizer, got " .. type(tok), 3)
  end
  local name = opts.template or "chatml"
  local tpl = TEMPLATES[name]
  if not tpl then
    error(("netcl.text.ChatFormat: unknown template %q (expected one of %s)"):format(tostring(name), template_names()), 3)
  end
  local ids = {}
  for _, sp in ipairs(tpl.specials) do
    local id = tok:token_to_id(sp)
    if id == nil or not tok:is_special(id) then
      error(("netcl.text.ChatFormat: template %q needs the special token %s, which the tokenizer does not have " ..
             "(give it in special_tokens when training or loading)"):format(name, sp), 3)
    end
    ids[sp] = id
  end
  self.tokenizer, self.template, self.stop_id, self._tpl, self._ids = tok, name, ids[tpl.stop], tpl, ids
end

-- The parts of a conversation, with adjacent text parts joined.
local function parts(self, messages, opts, fname)
  if type(messages) ~= "table" then
    error(("%s: messages must be an array of {role=, content=}, got %s"):format(fname, type(messages)), 3)
  end
  opts = opts or {}
  local tpl, out = self._tpl, {}
  local function add(list)
    for _, p in ipairs(list) do
      local last = out[#out]
      if p.text and last and last.text then
        out[#out] = {text = last.text .. p.text}
      elseif p.special or p.text ~= "" then
        out[#out + 1] = p
      end
    end
  end
  add(tpl.begin)
  for i, m in ipairs(messages) do
    if type(m) ~= "table" then error(("%s: message %d is a %s, expected a table"):format(fname, i, type(m)), 3) end
    if type(m.role) ~= "string" then
      error(("%s: message %d: role must be a string, got %s"):format(fname, i, type(m.role)), 3)
    end
    if type(m.content) ~= "string" then
      error(("%s: message %d: content must be a string, got %s"):format(fname, i, type(m.content)), 3)
    end
    add(tpl.message(m.role, m.content))
  end
  if opts.add_generation_prompt then add(tpl.generation) end
  return out
end

-- chat:render(messages, {add_generation_prompt=false}) -> string
function ChatFormat:render(messages, opts)
  local buf = {}
  for _, p in ipairs(parts(self, messages, opts, "netcl.text.ChatFormat.render")) do
    buf[#buf + 1] = p.special or p.text
  end
  return table.concat(buf)
end

-- chat:encode(messages, {add_generation_prompt=false}) -> array of ids. Equals
-- tok:encode(chat:render(messages), {allowed_special = <the template's tokens>}) whenever no
-- message content holds special-token text; such text is encoded as ordinary bytes here.
function ChatFormat:encode(messages, opts)
  local ids, tok = {}, self.tokenizer
  for _, p in ipairs(parts(self, messages, opts, "netcl.text.ChatFormat.encode")) do
    if p.special then
      ids[#ids + 1] = self._ids[p.special]
    else
      local t = tok:encode(p.text, {allowed_special = "none", strict = false})
      table.move(t, 1, #t, #ids + 1, ids)
    end
  end
  return ids
end

-- The special tokens the template uses, in a list.
function ChatFormat:special_tokens()
  return table.move(self._tpl.specials, 1, #self._tpl.specials, 1, {})
end

function ChatFormat:__tostring()
  return ("ChatFormat(template=%q)"):format(self.template)
end

return ChatFormat
