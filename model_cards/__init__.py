"""Model card templates (Markdown with Jinja), one per MiniTF family plus the sections of converted and trained
models; shipped as package data `hf_minitf.model_cards` and rendered by `hf_minitf.cards`."""
