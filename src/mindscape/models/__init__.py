"""Model files and the processes that serve them.

Everything about weights on disk lives here: the cache directory (:mod:`.cache`), the local
GGUF model's install and checks (:mod:`.local`), llama.cpp's server process
(:mod:`.server`, its watchdog child :mod:`._serve`, its entry point :mod:`.llama_server`).
The chat clients that talk to a server are in :mod:`mindscape.llm`.
"""
