"""Engine settings to paste: vLLM's speculative_config (`vllm_speculative`), SGLang, transformers and
llama-server's flags (`engine_settings`, `llamacpp_flags`).
"""
