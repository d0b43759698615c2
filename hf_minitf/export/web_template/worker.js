// Runs the model in model/ with transformers.js, off the page's thread: the page repaints while tokens stream in.
// site.json (written by `minitf export web`) names the task, the weight variants, the context length, the pinned
// transformers.js (a jsDelivr URL, or its copy beside the page) and, for a bundled page, onnxruntime-web's wasm files
// beside the page (else transformers.js fetches them from jsDelivr).
const here = (path) => new URL(path, self.location.href).href;
const ready = fetch('site.json').then((response) => response.json()).then(async (site) => {
  const transformers = await import(here(site.transformers_js));
  const { env } = transformers;
  if (site.onnxruntime_wasm) {
    // Loaded by ONNX Runtime itself, from this server: not pre-fetched into a blob: URL (the cache transformers.js
    // keeps), which a page's Content-Security-Policy would have to allow.
    env.backends.onnx.wasm.wasmPaths = { mjs: here(site.onnxruntime_wasm.mjs), wasm: here(site.onnxruntime_wasm.wasm) };
    env.useWasmCache = false;
  }
  // The model is served beside the page: fetched by path (transformers.js reads local models by path, not by URL)
  // and not kept in Cache Storage, which would hide a re-exported model behind the old one.
  env.allowLocalModels = true;
  env.allowRemoteModels = false;
  env.localModelPath = new URL('./', self.location.href).pathname;
  env.useBrowserCache = false;
  return { site, transformers };
});
let tokenizer, model, extractor, translatorCode, translator;

async function load({ dtype }) {
  const { site, transformers } = await ready;
  if (site.task === 'text-generation') {
    tokenizer ??= await transformers.AutoTokenizer.from_pretrained(site.model);
    model = await transformers.AutoModelForCausalLM.from_pretrained(site.model, { dtype });
  } else if (site.task === 'translation') {
    translatorCode ??= await import('./translator.js');
    const readJSON = async (name) => {
      const response = await fetch(`${site.model}/${name}`);
      if (!response.ok) throw new Error(`${site.model}/${name}: ${response.status} ${response.statusText}`);
      return response.json();
    };
    translator = await translatorCode.loadTranslator(transformers, { site, model: site.model, dtype, readJSON });
  } else {
    extractor = await transformers.pipeline('feature-extraction', site.model, { dtype });
  }
  return {};
}

async function translate({ text, maxNewTokens }) {
  if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1) throw new Error('New tokens: give a whole number, 1 or more.');
  const started = performance.now();
  const { ids, stoppedAtContext } = await translatorCode.translate(translator, text, {
    maxNewTokens, onText: (translated) => postMessage({ type: 'text', text: translated }),
  });
  return { newTokens: ids.length - 1, seconds: (performance.now() - started) / 1000, stoppedAtContext };
}

async function generate({ prompt, maxNewTokens }) {
  const { site, transformers } = await ready;
  if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1) throw new Error('New tokens: give a whole number, 1 or more.');
  const inputs = tokenizer(prompt);
  const promptLength = inputs.input_ids.dims[1];
  if (promptLength === 0) throw new Error('Type a prompt first: the model continues a text.');
  // transformers.js does not stop at a learned position table by itself; past it the model fails.
  const room = site.max_positions === null ? Infinity : site.max_positions - promptLength;
  if (room <= 0) throw new Error(`The prompt is ${promptLength} tokens; the model reads at most ${site.max_positions}.`);
  const streamer = new transformers.TextStreamer(tokenizer, {
    skip_prompt: true,
    skip_special_tokens: true,
    callback_function: (text) => postMessage({ type: 'text', text }),
  });
  const started = performance.now();
  const output = await model.generate({
    ...inputs, max_new_tokens: Math.min(maxNewTokens, room), do_sample: false, streamer,
  });
  const seconds = (performance.now() - started) / 1000;
  const newTokens = output.dims[1] - promptLength;
  return { newTokens, seconds, stoppedAtContext: maxNewTokens > room && newTokens === room };
}

async function compare({ source, sentences }) {
  const { transformers } = await ready;
  // SentenceTransformer's modules: Transformer -> mean Pooling -> Normalize.
  const started = performance.now();
  const embeddings = await extractor([source, ...sentences], { pooling: 'mean', normalize: true });
  const [first, ...rest] = embeddings.tolist();
  const seconds = (performance.now() - started) / 1000;
  return { scores: rest.map((vector) => transformers.cos_sim(first, vector)), seconds };
}

const HANDLERS = { load, generate, compare, translate };

self.onmessage = async ({ data }) => {
  try {
    postMessage({ type: 'done', ...(await HANDLERS[data.type](data)) });
  } catch (error) {
    postMessage({ type: 'error', message: error.message });
  }
};
