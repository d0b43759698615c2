// The page: a prompt box with streamed greedy generation for a GPT, a sentence-similarity box for an encoder, a
// text box with the streamed translation for a seq2seq translator. worker.js runs the model; this file only sends
// it requests and shows the answers.
const site = await (await fetch('site.json')).json();
const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
const status = document.getElementById('status');
const FORMS = { 'text-generation': 'generation', 'sentence-similarity': 'similarity', translation: 'translation' };
const form = document.getElementById(FORMS[site.task]);
const button = form.querySelector('button');
const dtypeSelect = form.querySelector('.dtype');
let onText = () => {};
let pending = null;

worker.onmessage = ({ data }) => {
  if (data.type === 'text') return onText(data.text);
  const { resolve, reject } = pending;
  pending = null;
  if (data.type === 'error') reject(new Error(data.message));
  else resolve(data);
};

worker.onerror = (event) => {
  pending?.reject(new Error(`the model worker failed: ${event.message ?? 'worker.js did not load'}`));
  pending = null;
};

/** Sends one request to the worker; the answer comes back as a promise (one request at a time). */
function request(message) {
  return new Promise((resolve, reject) => {
    pending = { resolve, reject };
    worker.postMessage(message);
  });
}

async function load() {
  status.textContent = `Loading the model (${dtypeSelect.value})...`;
  await request({ type: 'load', dtype: dtypeSelect.value });
  status.textContent = 'Ready.';
}

async function generate() {
  const prompt = document.getElementById('prompt').value;
  const maxNewTokens = Number(document.getElementById('max-new-tokens').value);
  const completion = document.getElementById('completion');
  const generated = completion.querySelector('.generated');
  completion.querySelector('.prompt').textContent = prompt;
  generated.textContent = '';
  onText = (text) => { generated.textContent += text; };
  status.textContent = 'Generating...';
  const { newTokens, seconds, stoppedAtContext } = await request({ type: 'generate', prompt, maxNewTokens });
  const stopped = stoppedAtContext ? `, stopped at the model's ${site.max_positions} positions` : '';
  form.dataset.seconds = String(seconds);
  status.textContent = `${newTokens} tokens in ${seconds.toFixed(2)} s (${(newTokens / seconds).toFixed(1)} tokens/s${stopped}).`;
}

async function translate() {
  const text = document.getElementById('source-text').value;
  const maxNewTokens = Number(document.getElementById('translation-max-new-tokens').value);
  const translated = document.getElementById('translated');
  translated.textContent = '';
  onText = (translation) => { translated.textContent = translation; };
  status.textContent = 'Translating...';
  const { newTokens, seconds, stoppedAtContext } = await request({ type: 'translate', text, maxNewTokens });
  const stopped = stoppedAtContext ? `, stopped at the model's ${site.translator.max_positions} positions` : '';
  form.dataset.seconds = String(seconds);
  status.textContent = `${newTokens} tokens in ${seconds.toFixed(2)} s (${(newTokens / seconds).toFixed(1)} tokens/s${stopped}).`;
}

async function compare() {
  const source = document.getElementById('source-sentence').value.trim();
  const sentences = document.getElementById('sentences').value.split('\n').map((s) => s.trim()).filter(Boolean);
  if (!source || sentences.length === 0) throw new Error('Give a source sentence and at least one sentence to compare.');
  status.textContent = 'Comparing...';
  const { scores, seconds } = await request({ type: 'compare', source, sentences });
  document.querySelector('#scores tbody').replaceChildren(...scores.map((score, i) => {
    const row = document.createElement('tr');
    const sentence = document.createElement('td');
    sentence.textContent = sentences[i];
    const cell = document.createElement('td');
    cell.className = 'score';
    cell.dataset.score = String(score);
    cell.textContent = score.toFixed(4);
    row.append(sentence, cell);
    return row;
  }));
  form.dataset.seconds = String(seconds);
  status.textContent = `Compared ${sentences.length} sentences in ${seconds.toFixed(2)} s.`;
}

/** Runs a step with the controls disabled, showing its error in the status line; counts finished steps in
 *  form.dataset.done (what the tests wait for). */
async function run(step) {
  button.disabled = dtypeSelect.disabled = true;
  try {
    await step();
  } catch (error) {
    status.textContent = `Error: ${error.message}`;
  } finally {
    button.disabled = dtypeSelect.disabled = false;
    form.dataset.done = String(Number(form.dataset.done ?? 0) + 1);
  }
}

for (const dtype of site.dtypes) dtypeSelect.add(new Option(dtype, dtype));
if (site.task === 'text-generation') {
  document.getElementById('prompt').value = site.examples[0] ?? '';
} else if (site.task === 'translation') {
  document.getElementById('source-text').value = site.examples[0] ?? '';
  document.getElementById('translation-max-new-tokens').value = String(site.translator.max_length - 1);
} else {
  const [source = '', ...others] = site.examples;
  document.getElementById('source-sentence').value = source;
  document.getElementById('sentences').value = others.join('\n');
}
dtypeSelect.addEventListener('change', () => run(load));
form.addEventListener('submit', (event) => {
  event.preventDefault();
  run({ 'text-generation': generate, 'sentence-similarity': compare, translation: translate }[site.task]);
});
form.hidden = false;
await run(load);
