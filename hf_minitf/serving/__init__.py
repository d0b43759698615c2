"""`minitf serve`: model folders behind transformers' own OpenAI-compatible server (`server`), with the models it
answers for (`models`), the checks of each request (`requests`), `/v1/embeddings` (`embeddings`) and errors in
OpenAI's shape (`errors`); `process` runs servers in subprocesses. `--engine vllm` (`vllm`) serves a GPT on vLLM
(`vllm_environment`: its Python, `vllm_model`: what it is given) behind a front that answers as the default engine
does (`vllm_front`)."""

API_KEY_VARIABLE = "MINITF_API_KEY"
"""The environment variable that holds the key `minitf serve` requires when `--api-key` is not given."""
