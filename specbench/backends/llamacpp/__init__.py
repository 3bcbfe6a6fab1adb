"""llama.cpp's llama-server as a backend: the server launched per configuration, where the binary is, the rounds rebuilt from its stream."""
