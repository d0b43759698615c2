// Runs a MiniTF ONNX export with transformers.js in Node, for the tests and the benchmark.
//   node run.mjs generate FOLDER DTYPE   stdin lines {"prompts": [...], "max_new_tokens": N}
//   node run.mjs embed FOLDER DTYPE      stdin lines {"sentences": [...]}
// Prints {"ready": true} once the model is loaded, then one line per request: {"seconds", "result"}, the result
// being the new token ids of each prompt (greedy) or the sentence embeddings (mean pooling, normalized).
import { AutoModelForCausalLM, AutoTokenizer, env, pipeline } from '@huggingface/transformers';
import path from 'node:path';
import readline from 'node:readline';

const [task, folder, dtype] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = path.dirname(path.resolve(folder));
const name = path.basename(path.resolve(folder));

async function generator() {
  const tokenizer = await AutoTokenizer.from_pretrained(name);
  const model = await AutoModelForCausalLM.from_pretrained(name, { dtype });
  return async ({ prompts, max_new_tokens }) => {
    const results = [];
    for (const prompt of prompts) {
      const inputs = tokenizer(prompt);
      const output = await model.generate({ ...inputs, max_new_tokens, do_sample: false });
      results.push(Array.from(output.data, Number).slice(inputs.input_ids.dims[1]));
    }
    return results;
  };
}

async function embedder() {
  const extractor = await pipeline('feature-extraction', name, { dtype });
  return async ({ sentences }) => (await extractor(sentences, { pooling: 'mean', normalize: true })).tolist();
}

const TASKS = { generate: generator, embed: embedder };
if (!TASKS[task]) throw new Error(`task must be one of ${Object.keys(TASKS).join(', ')}, got ${task}`);
const run = await TASKS[task]();
console.log(JSON.stringify({ ready: true }));
for await (const line of readline.createInterface({ input: process.stdin })) {
  const started = performance.now();
  const result = await run(JSON.parse(line));
  console.log(JSON.stringify({ seconds: (performance.now() - started) / 1000, result }));
}
