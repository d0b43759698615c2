// Runs a MiniTF ONNX export with transformers.js in Node, for the tests and the benchmark.
//   node run.mjs generate FOLDER DTYPE          stdin lines {"prompts": [...], "max_new_tokens": N}
//   node run.mjs text-generation FOLDER DTYPE   stdin lines {"prompts": [...], "max_new_tokens": N}
//   node run.mjs embed FOLDER DTYPE             stdin lines {"sentences": [...]}
//   node run.mjs translate SITE DTYPE           stdin lines {"texts": [...], "max_new_tokens": N or null}
//   node run.mjs TASK REPO_ID DTYPE --hub URL CACHE_DIR
// Prints {"ready": true} once the model is loaded, then one line per request: {"seconds", "result"}, the result
// being the new token ids of each prompt (greedy), for `text-generation` each prompt's {"ids", "text"} (the new ids
// and the `generated_text` of the cards' `pipeline("text-generation", ...)`, greedy), the sentence embeddings (mean
// pooling, normalized), or each text's translation {"ids", "text"} (greedy). `translate` runs the page
// `minitf export web` wrote in SITE: its own translator.js on its site.json and model folder. With `--hub`, the
// model is the repo REPO_ID of the Hub at URL, loaded as a web page loads it (no local files; downloads cached in
// CACHE_DIR).
import * as transformers from '@huggingface/transformers';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';

const { AutoModelForCausalLM, AutoTokenizer, env, pipeline } = transformers;

const [task, folder, dtype, hubOption, hubURL, cacheDir] = process.argv.slice(2);
let name;
if (hubOption === '--hub') {
  env.allowLocalModels = false;
  env.allowRemoteModels = true;
  env.remoteHost = hubURL;
  env.cacheDir = cacheDir;
  name = folder;
} else {
  env.allowRemoteModels = false;
  env.localModelPath = path.dirname(path.resolve(folder));
  name = path.basename(path.resolve(folder));
}

async function newTokens(tokenizer, model, prompt, max_new_tokens) {
  const inputs = tokenizer(prompt);
  const output = await model.generate({ ...inputs, max_new_tokens, do_sample: false });
  return Array.from(output.data, Number).slice(inputs.input_ids.dims[1]);
}

async function generator() {
  const tokenizer = await AutoTokenizer.from_pretrained(name);
  const model = await AutoModelForCausalLM.from_pretrained(name, { dtype });
  return async ({ prompts, max_new_tokens }) => {
    const results = [];
    for (const prompt of prompts) results.push(await newTokens(tokenizer, model, prompt, max_new_tokens));
    return results;
  };
}

async function textGenerator() {
  const generate = await pipeline('text-generation', name, { dtype });
  return async ({ prompts, max_new_tokens }) => {
    const results = [];
    for (const prompt of prompts) {
      const [output] = await generate(prompt, { max_new_tokens, do_sample: false });
      const ids = await newTokens(generate.tokenizer, generate.model, prompt, max_new_tokens);
      results.push({ ids, text: output.generated_text });
    }
    return results;
  };
}

async function embedder() {
  const extractor = await pipeline('feature-extraction', name, { dtype });
  return async ({ sentences }) => (await extractor(sentences, { pooling: 'mean', normalize: true })).tolist();
}

async function translator() {
  const site = JSON.parse(fs.readFileSync(path.join(folder, 'site.json'), 'utf8'));
  const page = await import(pathToFileURL(path.resolve(folder, 'translator.js')).href);
  env.localModelPath = path.resolve(folder);
  const readJSON = async (file) => JSON.parse(fs.readFileSync(path.join(folder, site.model, file), 'utf8'));
  const model = await page.loadTranslator(transformers, { site, model: site.model, dtype, readJSON });
  return async ({ texts, max_new_tokens }) => {
    const results = [];
    for (const text of texts) results.push(await page.translate(model, text, { maxNewTokens: max_new_tokens }));
    return results;
  };
}

const TASKS = { generate: generator, 'text-generation': textGenerator, embed: embedder, translate: translator };
if (!TASKS[task]) throw new Error(`task must be one of ${Object.keys(TASKS).join(', ')}, got ${task}`);
const run = await TASKS[task]();
console.log(JSON.stringify({ ready: true }));
for await (const line of readline.createInterface({ input: process.stdin })) {
  const started = performance.now();
  const result = await run(JSON.parse(line));
  console.log(JSON.stringify({ seconds: (performance.now() - started) / 1000, result }));
}
