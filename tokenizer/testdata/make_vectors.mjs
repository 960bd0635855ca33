// Writes the reference vectors the tokenizer tests compare against, with
// HuggingFace tokenizers' Node binding (the same Rust library as the Python
// package) as the oracle; the output is byte-identical to make_vectors.py's.
//
//   npm install --prefix /tmp/hf-tokenizers tokenizers@0.23.2
//   TOKENIZERS_PREFIX=/tmp/hf-tokenizers node tokenizer/testdata/make_vectors.mjs
//
// writes vectors_qwen3.json (from qwen3/tokenizer.json, see fetch.sh),
// vectors_synth.json (from synth/tokenizer.json) and vectors_edge.json (from
// edge/tokenizer.json) beside this script, or, with arguments TOKENIZER_JSON
// OUT_JSON [CORPUS_JSON], just that one file.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const prefix = process.env.TOKENIZERS_PREFIX || here;
const { Tokenizer } = createRequire(join(prefix, 'noop.js'))('tokenizers');

async function make(tokenizerPath, outPath, corpusPath) {
  const sha = createHash('sha256').update(readFileSync(tokenizerPath)).digest('hex');
  const texts = JSON.parse(readFileSync(corpusPath, 'utf8'));
  const tok = Tokenizer.fromFile(tokenizerPath);
  const lines = [];
  for (const text of texts) {
    const ids = (await tok.encode(text, null, { addSpecialTokens: true })).getIds();
    lines.push(JSON.stringify({
      text,
      ids,
      decoded: await tok.decode(ids, false),
      decoded_skip_special: await tok.decode(ids, true),
    }));
  }
  writeFileSync(outPath,
    '{"tokenizer_sha256":' + JSON.stringify(sha) + ',"vectors":[\n' + lines.join(',\n') + '\n]}\n');
  console.log(`wrote ${lines.length} vectors to ${outPath}`);
}

const args = process.argv.slice(2);
const corpus = join(here, 'corpus.json');
if (args.length === 2 || args.length === 3) {
  await make(args[0], args[1], args[2] || corpus);
} else if (args.length === 0) {
  for (const name of ['qwen3', 'synth', 'edge']) {
    await make(join(here, name, 'tokenizer.json'), join(here, `vectors_${name}.json`), corpus);
  }
} else {
  console.error('usage: node make_vectors.mjs [TOKENIZER_JSON OUT_JSON [CORPUS_JSON]]');
  process.exit(2);
}
