"""A value for each request field of `hf_minitf.serving.fields.FIELDS`, for the tests that walk the table: for an
honoured or accepted field one the server answers, for a refused one a value it refuses (one that asks for
something: structured output, a second choice, a stored response, ...)."""

from hf_minitf.serving.fields import COMPLETIONS, RESPONSES

# In every request of the walk: the model and what it is asked.
BASE_FIELDS = {"model", "prompt", "messages", "input", "max_tokens", "max_output_tokens"}
EXAMPLES = {
    # honoured
    "instructions": "Be brief.",
    "chat_template_kwargs": {"x": 1},
    "stream": True,
    "max_completion_tokens": 1,
    "temperature": 0.5,
    "top_p": 0.5,
    "seed": 3,
    "stop": "z",
    "frequency_penalty": -2.0,
    "presence_penalty": -1.0,
    "logit_bias": {"3": 100},
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}],
    # accepted
    "user": "user-1",
    "safety_identifier": "user-1",
    "metadata": {"k": "v"},
    "stream_options": {"include_usage": True},
    "prompt_cache_key": "k",
    "prompt_cache_options": {"ttl": "5m"},
    "prompt_cache_retention": "24h",
    "prediction": {"type": "content", "content": "x"},
    "parallel_tool_calls": False,
    "max_tool_calls": 3,
    # refused
    "n": 2,
    "best_of": 2,
    "echo": True,
    "suffix": "the end",
    "logprobs": True,
    "top_logprobs": 2,
    "generation_config": '{"num_beams": 2}',
    "response_format": {"type": "json_object"},
    "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}},
    "tool_choice": "required",
    "functions": [{"name": "f", "parameters": {}}],
    "function_call": "auto",
    "modalities": ["text", "audio"],
    "audio": {"voice": "alloy", "format": "wav"},
    "reasoning_effort": "high",
    "reasoning": {"effort": "high"},
    "verbosity": "low",
    "web_search_options": {},
    "moderation": {"model": "omni-moderation-latest"},
    "service_tier": "flex",
    "store": True,
    "previous_response_id": "resp_123",
    "conversation": "conv_123",
    "background": True,
    "background_options": {},
    "include": ["message.output_text.logprobs"],
    "truncation": "auto",
    "context_management": [{"type": "compaction"}],
    "image": {},
    "access_programs": {},
}
# Where a route's field differs from the others' of that name.
ROUTE_EXAMPLES = {
    (COMPLETIONS, "logprobs"): 1,
    (RESPONSES, "prompt"): {"id": "pmpt_123"},
    (RESPONSES, "tools"): [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}],
}


def example(route: str, name: str):
    """The value the walk sends for `name` on `route`."""
    return ROUTE_EXAMPLES.get((route, name), EXAMPLES.get(name))
