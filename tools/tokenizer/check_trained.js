#!/usr/bin/env node
// Oracle helper for tests/tokenizer/bpe_trainer_test.cpp: runs HF tokenizers (Rust, via the
// @anush008/tokenizers N-API binding in tools/npm) on what aspen's BPE trainer produced.
//
//   check_trained.js <tokenizer.json> <cases.jsonl>
//     Each line of cases.jsonl is {"text": "...", "ids": [...]} (aspen's ids). Loads the
//     tokenizer.json with HF, encodes each text without special tokens, prints one line per
//     mismatch and exits 1 if any; otherwise prints "ok <n>" and exits 0.
//   check_trained.js --train <skeleton.json> <corpus.txt> <out.json>
//     Trains the BPE model of the skeleton tokenizer.json with HF's default BpeTrainer on the
//     lines of corpus.txt (HF keeps line endings) and saves the result to out.json.
//
// Exit status 2 means the oracle itself could not run (bad arguments, missing module).
'use strict';
const fs = require('fs');
const path = require('path');

function loadTokenizers() {
  const dir = process.env.ASPEN_NPM_DIR || path.join(__dirname, '..', 'npm');
  return require(path.join(dir, 'node_modules', '@anush008', 'tokenizers'));
}

async function check(tokenizerPath, casesPath) {
  const {Tokenizer} = loadTokenizers();
  const tokenizer = Tokenizer.fromFile(tokenizerPath);
  const lines = fs.readFileSync(casesPath, 'utf8').split('\n').filter((l) => l.length > 0);
  let mismatches = 0;
  for (let i = 0; i < lines.length; ++i) {
    const {text, ids} = JSON.parse(lines[i]);
    const encoding = await tokenizer.encode(text, null, {addSpecialTokens: false});
    const hf = Array.from(encoding.getIds());
    if (JSON.stringify(hf) !== JSON.stringify(ids)) {
      ++mismatches;
      console.log(`case ${i} ${JSON.stringify(text)}: hf=${JSON.stringify(hf)} aspen=` +
                  JSON.stringify(ids));
    }
  }
  if (mismatches > 0) {
    console.log(`${mismatches} of ${lines.length} cases differ`);
    return 1;
  }
  console.log(`ok ${lines.length}`);
  return 0;
}

function train(skeletonPath, corpusPath, outPath) {
  const {Tokenizer} = loadTokenizers();
  const tokenizer = Tokenizer.fromFile(skeletonPath);
  tokenizer.train([corpusPath]);
  tokenizer.save(outPath, true);
  return 0;
}

async function main(argv) {
  if (argv.length === 4 && argv[0] === '--train') return train(argv[1], argv[2], argv[3]);
  if (argv.length === 2) return check(argv[0], argv[1]);
  console.error('usage: check_trained.js <tokenizer.json> <cases.jsonl>\n' +
                '       check_trained.js --train <skeleton.json> <corpus.txt> <out.json>');
  return 2;
}

main(process.argv.slice(2)).then((code) => process.exit(code), (err) => {
  console.error(`check_trained.js: ${err && err.stack ? err.stack : err}`);
  process.exit(2);
});
