// A MiniTF seq2seq translator run with transformers.js: its paired tokenizer as two transformers.js tokenizers
// (the source vocabulary encodes, the target one decodes) and the export's three ONNX graphs (encoder, first decoder
// step, cached decoder step), each run by transformers.js's session for a model of its own, with greedy search
// written out as `minitf translate` runs it. transformers.js has no model class for this architecture, so the loop
// is here. The page's worker imports it, and so do the Node tests (the same code on the same files).

// hkproj's tokenizers split words with the `Whitespace` pre-tokenizer, `\w+|[^\w\s]+` with Unicode classes (Rust's
// regex crate); transformers.js runs it with ASCII ones, splitting "città" in two. The same split as a `Split`
// pre-tokenizer with the Unicode classes spelled out (\w as Unicode's UTS #18 defines it, \s as White_Space) keeps
// the ids of the original.
const WORD = '\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}';
const UNICODE_WHITESPACE = {
  type: 'Split',
  pattern: { Regex: `[${WORD}]+|[^${WORD}\\p{White_Space}]+` },
  behavior: 'Removed',
  invert: true,
};

/** `pre_tokenizer` with each `Whitespace` step as `UNICODE_WHITESPACE`. */
function unicodeWords(preTokenizer) {
  if (preTokenizer?.type === 'Whitespace') return UNICODE_WHITESPACE;
  if (preTokenizer?.type === 'Sequence') {
    return { ...preTokenizer, pretokenizers: preTokenizer.pretokenizers.map(unicodeWords) };
  }
  return preTokenizer;
}

/** Loads the translator in `site.translator` (see `minitf export web`) from the model folder `model`, in the
 *  weights `dtype`; `readJSON(name)` reads a file of that folder. */
export async function loadTranslator(transformers, { site, model, dtype, readJSON }) {
  const { translator } = site;
  const [sourceJSON, targetJSON, tokenizerConfig] = await Promise.all(
    [translator.source_tokenizer, translator.target_tokenizer, 'tokenizer_config.json'].map(readJSON),
  );
  const tokenizer = (json) => new transformers.PreTrainedTokenizer(
    { ...json, pre_tokenizer: unicodeWords(json.pre_tokenizer) }, tokenizerConfig,
  );
  // A model of transformers.js's base class is one session, run on the inputs it names (`model_type: "custom"`:
  // no config.json needed, no class looked for).
  const graph = (name) => transformers.PreTrainedModel.from_pretrained(model, {
    config: { model_type: 'custom' }, model_file_name: name, dtype,
  });
  const [encoder, decoder, decoderWithPast] = await Promise.all(
    [translator.graphs.encoder, translator.graphs.decoder, translator.graphs.decoder_with_past].map(graph),
  );
  return { ...translator, transformers, source: tokenizer(sourceJSON), target: tokenizer(targetJSON), encoder, decoder, decoderWithPast };
}

/** The id of the highest of the last position's logits (the first of equal ones, as numpy's argmax). */
function lastArgmax(logits) {
  const vocabulary = logits.dims.at(-1);
  const row = logits.data.subarray(logits.data.length - vocabulary);
  let best = 0;
  for (let id = 1; id < vocabulary; ++id) if (row[id] > row[best]) best = id;
  return best;
}

/** The outputs `present.*` of a decoder step as the next step's `past_key_values.*` inputs, into `cache`. */
function keep(outputs, cache) {
  for (const [name, tensor] of Object.entries(outputs)) {
    if (name.startsWith('present.')) cache[`past_key_values.${name.slice('present.'.length)}`] = tensor;
  }
}

/** Greedy translation of `text`: `onText(translation)` gets the text so far after each token; returns the target
 *  ids (start token first, end token last when reached), the text, and whether the decoder's position table
 *  stopped it. Stops at an end token, after `maxNewTokens` (default: the generation config's max_length), or at
 *  the position table's end. */
export async function translate(model, text, { maxNewTokens = null, onText = () => {} } = {}) {
  const { Tensor } = model.transformers;
  if (!text.trim()) throw new Error('Cannot translate an empty text; give at least one word.');
  const { input_ids: inputIds, attention_mask: mask } = model.source(text);
  const sourceLength = inputIds.dims[1];
  if (sourceLength > model.max_positions) {
    throw new Error(
      `The source holds ${sourceLength} tokens, past this model's max_position_embeddings=${model.max_positions}. Shorten it.`,
    );
  }
  const asked = maxNewTokens === null ? model.max_length : 1 + maxNewTokens;
  const maxLength = Math.min(asked, model.max_positions + 1); // the last id's logits come from the last position
  const token = (id) => new Tensor('int64', BigInt64Array.from([BigInt(id)]), [1, 1]);
  const { last_hidden_state: states } = await model.encoder({ input_ids: inputIds, attention_mask: mask });
  const cache = {};
  let outputs = await model.decoder({
    input_ids: token(model.start_id), encoder_attention_mask: mask, encoder_hidden_states: states,
  });
  const ids = [model.start_id];
  for (;;) {
    keep(outputs, cache);
    ids.push(lastArgmax(outputs.logits));
    const translation = model.target.decode(ids, { skip_special_tokens: true });
    onText(translation);
    if (model.end_ids.includes(ids.at(-1)) || ids.length >= maxLength) {
      const stoppedAtContext = !model.end_ids.includes(ids.at(-1)) && asked > maxLength && ids.length === maxLength;
      return { sourceIds: Array.from(inputIds.data, Number), ids, text: translation, stoppedAtContext };
    }
    outputs = await model.decoderWithPast({ input_ids: token(ids.at(-1)), encoder_attention_mask: mask, ...cache });
  }
}
